import { randomFillSync } from "node:crypto";

/**
 * Random bytes drawn 4 KiB at a time (one call into the CSPRNG per 256 task ids, request ids or
 * about 170 spans, not one per id), shared by every id the service makes. Module state, as
 * `crypto.randomUUID`'s own batch is: ids are made on every request.
 */
const POOL_BYTES = 4096;

/** The pool {@link drawRandom} hands out places in. */
export const randomPool: Buffer = Buffer.allocUnsafeSlow(POOL_BYTES);
let used = POOL_BYTES;

/**
 * Where `count` (at most 4,096) fresh random bytes start in {@link randomPool}: each byte is
 * handed out once. Read them at once: a later draw may refill the pool.
 */
export function drawRandom(count: number): number {
  if (used + count > POOL_BYTES) {
    randomFillSync(randomPool);
    used = 0;
  }
  const at = used;
  used += count;
  return at;
}
