import { randomFillSync } from "node:crypto";

const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let used = POOL_BYTES;

/** `bytes` random bytes as hex, from a pool refilled 4 KiB at a time (one syscall per ~170 spans). */
function randomHex(bytes: number): string {
  if (used + bytes > POOL_BYTES) {
    randomFillSync(pool);
    used = 0;
  }
  const hex = pool.toString("hex", used, used + bytes);
  used += bytes;
  return hex;
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
