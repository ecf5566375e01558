import type Keyv from "keyv";
import { canTransition, isFinished, type TaskRecord } from "../task-record.js";
import type { CreateResult, Idempotency, TaskStore } from "../task-store.js";

interface IdempotencyEntry {
  taskId: string;
  fingerprint: string;
}

/**
 * A {@link TaskStore} on Keyv (memory or SQLite). Read-modify-write steps
 * run one at a time through a promise chain: these backends have one
 * process writing, so that is enough to make `transition` a compare-and-set.
 */
export function createKeyvTaskStore(
  keyv: Keyv,
  options: { persistent: boolean; idempotencyTtlMs: number; now?: () => number },
): TaskStore {
  const now = options.now ?? Date.now;
  let chain: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(step: () => Promise<T>): Promise<T> => {
    const result = chain.then(step);
    chain = result.catch(() => undefined);
    return result;
  };
  const taskKey = (id: string) => `task:${id}`;
  const imageKey = (id: string, index: number) => `image:${id}:${index}`;
  const UNFINISHED = "index:unfinished";

  const readUnfinished = async () => ((await keyv.get(UNFINISHED)) as string[] | undefined) ?? [];

  /*
   * Keyv drops an expired entry only when it is read, so finished tasks, their
   * images and idempotency keys would stay on disk for ever. Each key with a
   * TTL is also listed in the bucket of the minute it expires in; the sweep
   * deletes whole buckets once their minute has passed: O(expired), no scan.
   */
  const BUCKET_MS = 60_000;
  const SWEPT_UNTIL = "meta:swept-until";
  const bucketKey = (bucket: number) => `expiring:${bucket}`;
  const expireLater = async (keys: string[], ttlMs: number) => {
    const bucket = Math.floor((now() + ttlMs) / BUCKET_MS) + 1;
    const listed = ((await keyv.get(bucketKey(bucket))) as string[] | undefined) ?? [];
    await keyv.set(bucketKey(bucket), [...listed, ...keys]);
  };

  return {
    persistent: options.persistent,

    async get(id) {
      return (await keyv.get(taskKey(id))) as TaskRecord | undefined;
    },

    create(record, idempotency?: Idempotency, admit?: () => boolean) {
      return exclusive(async (): Promise<CreateResult> => {
        const idemKey = idempotency && `idem:${record.owner}:${idempotency.key}`;
        if (idemKey && idempotency) {
          const seen = (await keyv.get(idemKey)) as IdempotencyEntry | undefined;
          const earlier =
            seen && ((await keyv.get(taskKey(seen.taskId))) as TaskRecord | undefined);
          if (seen && earlier) {
            return seen.fingerprint === idempotency.fingerprint
              ? { kind: "replayed", record: earlier }
              : { kind: "conflict" };
          }
        }
        if (admit && !admit()) return { kind: "refused" };
        await keyv.set(taskKey(record.id), record);
        await keyv.set(UNFINISHED, [...(await readUnfinished()), record.id]);
        if (idemKey && idempotency) {
          await keyv.set(
            idemKey,
            { taskId: record.id, fingerprint: idempotency.fingerprint } satisfies IdempotencyEntry,
            options.idempotencyTtlMs,
          );
          await expireLater([idemKey], options.idempotencyTtlMs);
        }
        return { kind: "created", record };
      });
    },

    transition(id, expected, patch, ttlMs) {
      return exclusive(async () => {
        const current = (await keyv.get(taskKey(id))) as TaskRecord | undefined;
        if (!current || current.status !== expected) return undefined;
        if (!canTransition(expected, patch.status)) {
          throw new Error(`illegal task transition ${expected} -> ${patch.status}`);
        }
        const next: TaskRecord = { ...current, ...patch };
        const finished = isFinished(next.status);
        await keyv.set(taskKey(id), next, finished ? ttlMs : undefined);
        if (finished) {
          await keyv.set(
            UNFINISHED,
            (await readUnfinished()).filter((other) => other !== id),
          );
          if (ttlMs !== undefined) {
            const images = Array.from({ length: next.images?.length ?? 0 }, (_, index) =>
              imageKey(id, index),
            );
            // Image TTLs may run a little longer than the task's: the sweep waits for them too.
            await expireLater([taskKey(id), ...images], ttlMs + BUCKET_MS);
          }
        }
        return next;
      });
    },

    async listUnfinished() {
      const ids = await readUnfinished();
      const records = await Promise.all(ids.map((id) => keyv.get(taskKey(id))));
      return (records as Array<TaskRecord | undefined>)
        .filter((record): record is TaskRecord => Boolean(record) && !isFinished(record!.status))
        .sort((a, b) => a.created - b.created);
    },

    async putImage(id, index, bytes, ttlMs) {
      // Base64 text, so every Keyv backend stores it the same way.
      await keyv.set(imageKey(id, index), bytes.toString("base64"), ttlMs);
    },

    async getImage(id, index) {
      const stored = (await keyv.get(imageKey(id, index))) as string | undefined;
      return stored === undefined ? undefined : Buffer.from(stored, "base64");
    },

    async deleteImages(id, count) {
      await Promise.all(
        Array.from({ length: count }, (_, index) => keyv.delete(imageKey(id, index))),
      );
    },

    getOrSetMeta(key, create) {
      return exclusive(async () => {
        const metaKey = `meta:${key}`;
        const existing = (await keyv.get(metaKey)) as string | undefined;
        if (existing) return existing;
        const value = create();
        await keyv.set(metaKey, value);
        return value;
      });
    },

    sweepExpired() {
      return exclusive(async () => {
        const current = Math.floor(now() / BUCKET_MS);
        let from = (await keyv.get(SWEPT_UNTIL)) as number | undefined;
        if (from === undefined) {
          // A new store: nothing can be listed in a bucket before this one.
          await keyv.set(SWEPT_UNTIL, current);
          return 0;
        }
        let deleted = 0;
        // Bounded per call, so a store left alone for months catches up in steps.
        for (let bucket = from; bucket <= current && bucket < from + 10_000; bucket += 1) {
          const keys = (await keyv.get(bucketKey(bucket))) as string[] | undefined;
          if (keys?.length) {
            await Promise.all(keys.map((key) => keyv.delete(key)));
            deleted += keys.length;
          }
          await keyv.delete(bucketKey(bucket));
        }
        from = Math.min(current + 1, from + 10_000);
        await keyv.set(SWEPT_UNTIL, from);
        return deleted;
      });
    },

    async ping() {
      await keyv.get("meta:ping");
    },

    async close() {
      await chain;
      await keyv.disconnect();
    },
  };
}
