import type { RedisClient } from "../../redis/redis-client.js";
import type { RedisStoreKeys } from "../../redis/redis-keys.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";
import type { OwnedPage, OwnedQuery } from "../core/task-store.js";
import { LIST } from "./redis-task-scripts.js";

/** What {@link listOwnedTasks} needs of the Redis store. */
export interface RedisListState {
  client: RedisClient;
  keys: Pick<RedisStoreKeys, "owner" | "owned">;
  /** The records of `ids`, in their order (undefined where one is gone or expired). */
  read(ids: string[]): Promise<Array<TaskRecord | undefined>>;
}

/**
 * A page of an owner's tasks, newest first (oldest first with `asc`), from
 * the owner's index (or its index of one status): the LIST script finds where
 * the page starts, so the page costs its own entries, not a walk over the
 * owner's tasks. Records that expired before the sweep took them out of the
 * index are skipped.
 * Undefined when `after` is not one of the owner's tasks.
 */
export async function listOwnedTasks(
  s: RedisListState,
  owner: string,
  { limit, after, status, nowSec, order }: OwnedQuery,
): Promise<OwnedPage | undefined> {
  const index = status ? s.keys.owned(status, owner) : s.keys.owner(owner);
  const records: TaskRecord[] = [];
  let from: { after?: string; bound?: string } = { after };
  while (records.length <= limit) {
    const want = limit + 1 - records.length;
    const page = (await LIST.run(
      s.client,
      [s.keys.owner(owner), index],
      [from.after ?? "", from.bound ?? "", want, order ?? "desc"],
    )) as string[] | null;
    if (page === null) return undefined;
    const ids = page.filter((_, at) => at % 2 === 0);
    if (ids.length === 0) break;
    for (const record of await s.read(ids)) {
      if (!record || (status !== undefined && record.status !== status)) continue;
      if (isFinished(record.status) && (record.expires_at ?? Infinity) <= nowSec) continue;
      records.push(record);
    }
    if (ids.length < want) break;
    from = { bound: `(${page[page.length - 1]}` };
  }
  return { records: records.slice(0, limit), hasMore: records.length > limit };
}

/** `TaskStore.webhookOutbox`: the outbox's first `limit` tasks, oldest first, and since when. */
export async function listWebhookOutbox(
  client: RedisClient,
  outboxKey: string,
  limit: number,
): Promise<Array<{ id: string; sinceMs: number }>> {
  const flat = await client.zrange(outboxKey, 0, limit - 1, "WITHSCORES");
  const entries: Array<{ id: string; sinceMs: number }> = [];
  for (let at = 0; at < flat.length; at += 2) {
    entries.push({ id: flat[at]!, sinceMs: Number(flat[at + 1]) });
  }
  return entries;
}
