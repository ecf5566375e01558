import { performance } from "node:perf_hooks";

const TWO_32 = 0x1_0000_0000;

/*
 * Span times are `performance.now()` readings (monotonic, one number, no
 * allocation); they become nanoseconds since the epoch only when exported,
 * from the one origin every reading shares.
 */
const ORIGIN_NS =
  BigInt(Math.floor(performance.timeOrigin)) * 1_000_000n +
  BigInt(Math.round((performance.timeOrigin % 1) * 1e6));
const ORIGIN_HIGH = Number(ORIGIN_NS >> 32n);
const ORIGIN_LOW = Number(ORIGIN_NS & 0xffff_ffffn);

/** Now, as a span's start, end or event time. */
export function spanNow(): number {
  return performance.now();
}

/**
 * Writes a {@link spanNow} reading as nanoseconds since the epoch, as the
 * high and low 32 bits of a fixed64 (no BigInt, no array on the protobuf path).
 */
export function writeEpochNanos(
  writer: { fixed64(high: number, low: number): void },
  time: number,
): void {
  const relative = Math.round(time * 1e6);
  const relativeHigh = Math.floor(relative / TWO_32);
  let low = ORIGIN_LOW + (relative - relativeHigh * TWO_32);
  let high = ORIGIN_HIGH + relativeHigh;
  if (low >= TWO_32) {
    low -= TWO_32;
    high += 1;
  }
  writer.fixed64(high, low);
}

/** A {@link spanNow} reading as nanoseconds since the epoch, in decimal (OTLP/JSON). */
export function epochNanosText(time: number): string {
  return (ORIGIN_NS + BigInt(Math.round(time * 1e6))).toString();
}
