import { drawRandom, randomPool } from "../ids/random-pool.js";

/** `bytes` random bytes as hex. */
function randomHex(bytes: number): string {
  const at = drawRandom(bytes);
  return randomPool.toString("hex", at, at + bytes);
}

const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);

/** A new span id: 16 random hex digits, never all zeros. */
export function newSpanId(): string {
  const id = randomHex(8);
  return id === ZERO_SPAN ? newSpanId() : id;
}

/**
 * A new trace id and its root span's id, as one 48-digit hex string: the trace id's 32, then
 * the span id's 16, neither all zeros (one conversion for both, not two).
 */
export function newRootIds(): string {
  const ids = randomHex(24);
  return ids.startsWith(ZERO_TRACE) || ids.endsWith(ZERO_SPAN) ? newRootIds() : ids;
}
