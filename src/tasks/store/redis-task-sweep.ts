import type { RedisClient } from "../../redis/redis-client.js";
import { DROP_EXPIRED } from "./redis-task-scripts.js";

/** Tasks (and image keys) one sweep step takes. */
const SWEEP_BATCH = 200;

/** What the sweep needs of the Redis store. */
export interface RedisSweepState {
  client: RedisClient;
  now: () => number;
  expiring: string;
  expiringImages: string;
  outbox: string;
  /** A due task's record and the owner's indexes (all, then by status): six keys. */
  keysOfTask(id: string, owner: string): string[];
}

/**
 * Deletes what expired: due tasks out of every index and their records, then
 * the image store keys that expired with them, handed to `dropImages`.
 * Bounded per call and per script run, so one call never holds Redis for long.
 */
export async function sweepExpired(
  s: RedisSweepState,
  dropImages: ((keys: string[]) => Promise<void>) | undefined,
): Promise<number> {
  let deleted = 0;
  for (let round = 0; round < 20; round += 1) {
    const now = s.now();
    const due = await s.client.zrangebyscore(s.expiring, "-inf", now, "LIMIT", 0, SWEEP_BATCH);
    if (due.length > 0) deleted += await dropExpired(s, due);
    const images = await s.client.zrangebyscore(
      s.expiringImages,
      "-inf",
      now,
      "LIMIT",
      0,
      SWEEP_BATCH,
    );
    if (images.length > 0) {
      // Handed on before they leave the index: a failed delete is tried again next sweep.
      await dropImages?.(images);
      await s.client.zrem(s.expiringImages, ...images);
    }
    if (due.length < SWEEP_BATCH && images.length < SWEEP_BATCH) break;
  }
  return deleted;
}

/**
 * Takes due tasks out of every index and deletes what is left of them, in
 * one script that names each key it touches; answers how many records went.
 */
async function dropExpired(s: RedisSweepState, members: string[]): Promise<number> {
  const keys = [s.expiring, s.outbox];
  for (const member of members) {
    const bar = member.indexOf("|");
    keys.push(...s.keysOfTask(member.slice(0, bar), member.slice(bar + 1)));
  }
  return (await DROP_EXPIRED.run(s.client, keys, members)) as number;
}
