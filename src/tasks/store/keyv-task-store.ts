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
  options: { persistent: boolean; idempotencyTtlMs: number },
): TaskStore {
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

    async ping() {
      await keyv.get("meta:ping");
    },

    async close() {
      await chain;
      await keyv.disconnect();
    },
  };
}
