import { dayOf, dayOfKey } from "./image-keys.js";
import type { ImageStore } from "./image-store.js";

/** Objects deleted per request batch, and per sweep at most (the next sweep goes on). */
const BATCH = 100;
const MAX_PER_SWEEP = 10_000;

/**
 * Deletes every object in an expiry-day folder that is over (`<day>/...` with
 * the day before today, UTC): what outlived its task, whatever the reason (a
 * crash between writing the images and recording the task, a delete that
 * failed). Keys are listed in order, oldest day first, so a sweep with nothing
 * to do reads one page and stops at today's folder. Keys that do not start
 * with a day are not the service's and are left alone. Resolves the number
 * of objects deleted.
 */
export async function sweepExpiredImages(
  store: ImageStore,
  options: { nowMs: number },
): Promise<number> {
  const today = dayOf(Math.floor(options.nowMs / 1000));
  let batch: string[] = [];
  let deleted = 0;
  for await (const { key } of store.list("")) {
    const day = dayOfKey(key);
    if (day === undefined) continue;
    if (day >= today) break;
    batch.push(key);
    if (batch.length === BATCH) {
      await store.delete(batch);
      deleted += batch.length;
      batch = [];
      if (deleted >= MAX_PER_SWEEP) return deleted;
    }
  }
  if (batch.length > 0) await store.delete(batch);
  return deleted + batch.length;
}
