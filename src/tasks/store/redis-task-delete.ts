import type { RedisClient } from "../../redis/redis-client.js";
import type { RedisStoreKeys } from "../../redis/redis-keys.js";
import { TASK_STATUSES } from "../../contract/task-contract.js";
import { imageKeysOf, type TaskRecord } from "../core/task-record.js";
import { DELETE } from "./redis-task-scripts.js";

/** A record as the Redis store keeps it: `rev` counts its writes. */
type Versioned = TaskRecord & { rev: number };

/** What a delete needs of the Redis store. */
export interface RedisDeleteState<R extends Versioned> {
  client: RedisClient;
  keys: RedisStoreKeys;
  /** The record as stored, with `rev`, the version the script compares. */
  read(id: string): Promise<R | undefined>;
}

/**
 * Deletes a task with every index entry it has, in one script, if the
 * record did not change since it was read (else reads it again): the owner's
 * indexes (its share of the store is the size of one), the unfinished list,
 * the expiring index and the task's image keys in the expiring images, the
 * webhook outbox. Resolves the record as deleted, or undefined when it was gone.
 */
export async function deleteRedisTask<R extends Versioned>(
  s: RedisDeleteState<R>,
  id: string,
): Promise<R | undefined> {
  const { keys } = s;
  for (;;) {
    const current = await s.read(id);
    if (!current) return undefined;
    const { owner } = current;
    const deleted = (await DELETE.run(
      s.client,
      [
        keys.task(id),
        keys.owner(owner),
        ...TASK_STATUSES.map((status) => keys.owned(status, owner)),
        keys.unfinished,
        keys.expiring,
        keys.webhookOutbox,
        keys.expiringImages,
      ],
      [current.rev, id, `${id}|${owner}`, ...imageKeysOf(current)],
    )) as number;
    if (deleted === 1) return current;
    if (deleted === 0) return undefined;
  }
}
