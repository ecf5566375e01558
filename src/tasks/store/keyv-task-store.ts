import type Keyv from "keyv";
import {
  canTransition,
  imageKeysOf,
  isFinished,
  type TaskRecord,
  type TaskStatus,
} from "../task-record.js";
import { createKeyvWebhookJournal } from "./keyv-webhook-journal.js";
import type {
  CreateResult,
  Idempotency,
  IdempotentAnswer,
  OutboxEntry,
  OwnedPage,
  TaskStore,
} from "./task-store.js";

interface IdempotencyEntry {
  taskId: string;
  fingerprint: string;
}

/**
 * One task in its owner's index, in the order tasks were created, with its
 * status, so a list filtered by status reads only the records it returns.
 * (Entries written before the list existed have no status.)
 */
type OwnerEntry = [id: string, created: number, status?: TaskStatus];

/** Options of {@link createKeyvTaskStore}. */
export interface KeyvTaskStoreOptions {
  persistent: boolean;
  idempotencyTtlMs: number;
  /**
   * Images and edit inputs are kept as Buffers, not base64 text: for a Keyv
   * that keeps values as they are (the memory store, no serializer), where
   * text would cost a third more, on the JavaScript heap.
   */
  binaryImages?: boolean;
  now?: () => number;
}

/**
 * A {@link TaskStore} on Keyv for one process: the memory store. Read-modify-
 * write steps run one at a time through a promise chain: with one process
 * writing, that is enough to make `create` and `transition` atomic.
 *
 * Without a serializer (the memory store) Keyv hands out the objects it
 * holds: no caller may change a record or an index it read (every change
 * writes a new one).
 */
export function createKeyvTaskStore(keyv: Keyv, options: KeyvTaskStoreOptions): TaskStore {
  const now = options.now ?? Date.now;
  let chain: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(step: () => Promise<T>): Promise<T> => {
    const result = chain.then(step);
    chain = result.catch(() => undefined);
    return result;
  };
  const taskKey = (id: string) => `task:${id}`;
  const imageKey = (id: string, index: number) => `image:${id}:${index}`;
  const inputKey = (id: string, index: number) => `input:${id}:${index}`;
  const idemKey = (owner: string, key: string) => `idem:${owner}:${key}`;
  /** Each owner's tasks, oldest first: its share of the store, and (later) its task list. */
  const ownerKey = (owner: string) => `owner:${owner}`;
  const UNFINISHED = "index:unfinished";
  /** Finished tasks whose webhook event is not queued yet: `[id, sinceMs]`. */
  const OUTBOX = "index:webhook-outbox";

  const read = async <T>(key: string): Promise<T | undefined> =>
    (await keyv.get(key)) as T | undefined;
  const readUnfinished = async () => (await read<string[]>(UNFINISHED)) ?? [];
  const readOwner = async (owner: string) => (await read<OwnerEntry[]>(ownerKey(owner))) ?? [];
  const readOutbox = async () => (await read<Array<[string, number]>>(OUTBOX)) ?? [];
  /** Bytes as they are stored: base64 text for a serializing Keyv, an exact-size Buffer otherwise. */
  const toStored = (bytes: Buffer): string | Buffer => {
    if (!options.binaryImages) return bytes.toString("base64");
    // A small Buffer may be a slice of a shared 8 KiB pool, which it would keep alive.
    if (bytes.byteLength === bytes.buffer.byteLength) return bytes;
    const copy = Buffer.allocUnsafeSlow(bytes.byteLength);
    bytes.copy(copy);
    return copy;
  };
  const fromStored = (stored: string | Buffer | undefined): Buffer | undefined =>
    typeof stored === "string" ? Buffer.from(stored, "base64") : stored;
  const readMany = async <T>(keys: string[]): Promise<Array<T | undefined>> =>
    keys.length === 0 ? [] : ((await keyv.get(keys)) as Array<T | undefined>);

  /*
   * Keyv drops an expired entry only when it is read, so finished tasks, their
   * images and idempotency keys would stay on disk for ever. Each key with a
   * TTL is also listed in the bucket of the minute it expires in; the sweep
   * deletes whole buckets once their minute has passed: O(expired), no scan.
   * A bucket also lists `owner-entry:<id>:<owner>` for each expiring task, so
   * the sweep takes the task out of its owner's index too.
   */
  const BUCKET_MS = 60_000;
  const SWEPT_UNTIL = "meta:swept-until";
  const OWNER_ENTRY = "owner-entry:";
  /** A bucket entry naming an image store key that expires with its task (handed on, not deleted here). */
  const IMAGE_ENTRY = "image-key:";
  const bucketKey = (bucket: number) => `expiring:${bucket}`;
  const expireLater = async (keys: string[], ttlMs: number) => {
    const bucket = Math.floor((now() + ttlMs) / BUCKET_MS) + 1;
    const listed = (await read<string[]>(bucketKey(bucket))) ?? [];
    // Appended in place: without a serializer the list read is the one held, and a copy
    // per finished task of a minute's list was most of the memory store's work.
    listed.push(...keys);
    await keyv.set(bucketKey(bucket), listed);
  };

  /** Takes expired tasks out of their owners' indexes; an empty index is deleted. */
  const dropFromOwners = async (entries: string[]) => {
    const byOwner = new Map<string, Set<string>>();
    for (const entry of entries) {
      const rest = entry.slice(OWNER_ENTRY.length);
      const colon = rest.indexOf(":");
      const owner = rest.slice(colon + 1);
      byOwner.set(owner, (byOwner.get(owner) ?? new Set()).add(rest.slice(0, colon)));
    }
    for (const [owner, ids] of byOwner) {
      const kept = (await readOwner(owner)).filter(([id]) => !ids.has(id));
      if (kept.length > 0) await keyv.set(ownerKey(owner), kept);
      else await keyv.delete(ownerKey(owner));
    }
  };

  const findIdempotent = async (
    owner: string,
    idempotency: Idempotency,
  ): Promise<IdempotentAnswer | undefined> => {
    const seen = await read<IdempotencyEntry>(idemKey(owner, idempotency.key));
    const earlier = seen && (await read<TaskRecord>(taskKey(seen.taskId)));
    if (!seen || !earlier) return undefined;
    return seen.fingerprint === idempotency.fingerprint
      ? { kind: "replayed", record: earlier }
      : { kind: "conflict" };
  };

  return {
    persistent: options.persistent,

    get: (id) => read<TaskRecord>(taskKey(id)),

    findIdempotent,

    create(record, { idempotency, maxPerOwner } = {}) {
      return exclusive(async (): Promise<CreateResult> => {
        if (idempotency) {
          const answer = await findIdempotent(record.owner, idempotency);
          if (answer) return answer;
        }
        const owned = await readOwner(record.owner);
        if (maxPerOwner !== undefined && owned.length >= maxPerOwner) return { kind: "owner_full" };
        await keyv.set(taskKey(record.id), record);
        owned.push([record.id, record.created, record.status]);
        await keyv.set(ownerKey(record.owner), owned);
        const unfinished = await readUnfinished();
        unfinished.push(record.id);
        await keyv.set(UNFINISHED, unfinished);
        if (idempotency) {
          const key = idemKey(record.owner, idempotency.key);
          await keyv.set(
            key,
            { taskId: record.id, fingerprint: idempotency.fingerprint } satisfies IdempotencyEntry,
            options.idempotencyTtlMs,
          );
          await expireLater([key], options.idempotencyTtlMs);
        }
        return { kind: "created", record };
      });
    },

    transition(id, expected, patch, { ttlMs, attempts } = {}) {
      return exclusive(async () => {
        const current = await read<TaskRecord>(taskKey(id));
        if (!current || current.status !== expected) return undefined;
        if (attempts !== undefined && current.attempts !== attempts) return undefined;
        if (!canTransition(expected, patch.status)) {
          throw new Error(`illegal task transition ${expected} -> ${patch.status}`);
        }
        const next: TaskRecord = { ...current, ...patch };
        // A field patched to undefined is gone, in every backend alike.
        for (const key of Object.keys(patch) as Array<keyof TaskRecord>) {
          if (patch[key] === undefined) delete next[key];
        }
        const finished = isFinished(next.status);
        await keyv.set(taskKey(id), next, finished ? ttlMs : undefined);
        if (next.status !== expected) {
          const owned = await readOwner(next.owner);
          const at = owned.findIndex(([other]) => other === id);
          if (at !== -1) {
            owned[at] = [id, owned[at]![1], next.status];
            await keyv.set(ownerKey(next.owner), owned);
          }
        }
        if (finished) {
          const unfinished = await readUnfinished();
          const at = unfinished.indexOf(id);
          if (at !== -1) {
            unfinished.splice(at, 1);
            await keyv.set(UNFINISHED, unfinished);
          }
          if (next.webhook) {
            const outbox = await readOutbox();
            outbox.push([id, now()]);
            await keyv.set(OUTBOX, outbox);
          }
          await Promise.all(
            (next.inputs ?? []).map((_, index) => keyv.delete(inputKey(id, index))),
          );
          if (ttlMs !== undefined) {
            const images = Array.from({ length: next.images?.length ?? 0 }, (_, index) =>
              imageKey(id, index),
            );
            // Image TTLs may run a little longer than the task's: the sweep waits for them too.
            await expireLater(
              [
                taskKey(id),
                ...images,
                `${OWNER_ENTRY}${id}:${next.owner}`,
                ...imageKeysOf(next).map((key) => `${IMAGE_ENTRY}${key}`),
              ],
              ttlMs + BUCKET_MS,
            );
          }
        }
        return next;
      });
    },

    async listUnfinished() {
      const ids = await readUnfinished();
      const records = await Promise.all(ids.map((id) => read<TaskRecord>(taskKey(id))));
      return records
        .filter((record): record is TaskRecord => Boolean(record) && !isFinished(record!.status))
        .sort((a, b) => a.created - b.created);
    },

    listOwned(owner, { limit, after, status, nowSec }) {
      return exclusive(async (): Promise<OwnedPage | undefined> => {
        const owned = await readOwner(owner);
        let end = owned.length;
        if (after !== undefined) {
          end = owned.findIndex(([id]) => id === after);
          if (end === -1) return undefined;
        }
        const records: TaskRecord[] = [];
        // Newest first; the index's status spares reading records of other statuses.
        let at = end - 1;
        while (at >= 0 && records.length <= limit) {
          const batch: string[] = [];
          for (; at >= 0 && batch.length < limit + 1 - records.length; at -= 1) {
            const [id, , indexed] = owned[at]!;
            if (status === undefined || indexed === undefined || indexed === status) batch.push(id);
          }
          for (const record of await readMany<TaskRecord>(batch.map(taskKey))) {
            if (!record || (status !== undefined && record.status !== status)) continue;
            if (isFinished(record.status) && (record.expires_at ?? Infinity) <= nowSec) continue;
            records.push(record);
          }
        }
        return { records: records.slice(0, limit), hasMore: records.length > limit };
      });
    },

    async putImage(id, index, bytes, ttlMs) {
      await keyv.set(imageKey(id, index), toStored(bytes), ttlMs);
    },

    async getImage(id, index) {
      return fromStored(await read<string | Buffer>(imageKey(id, index)));
    },

    async deleteImages(id, count) {
      await Promise.all(
        Array.from({ length: count }, (_, index) => keyv.delete(imageKey(id, index))),
      );
    },

    putInput(id, index, bytes, ttlMs) {
      return exclusive(async () => {
        await keyv.set(inputKey(id, index), toStored(bytes), ttlMs);
        await expireLater([inputKey(id, index)], ttlMs);
      });
    },

    async getInput(id, index) {
      return fromStored(await read<string | Buffer>(inputKey(id, index)));
    },

    async deleteInputs(id, count) {
      await Promise.all(
        Array.from({ length: count }, (_, index) => keyv.delete(inputKey(id, index))),
      );
    },

    async webhookOutbox(limit): Promise<OutboxEntry[]> {
      return (await readOutbox()).slice(0, limit).map(([id, sinceMs]) => ({ id, sinceMs }));
    },

    clearWebhookOutbox(id) {
      return exclusive(async () => {
        const outbox = await readOutbox();
        const kept = outbox.filter(([other]) => other !== id);
        if (kept.length !== outbox.length) await keyv.set(OUTBOX, kept);
      });
    },

    webhookJournal: createKeyvWebhookJournal(keyv, exclusive),

    getOrSetMeta(key, create) {
      return exclusive(async () => {
        const metaKey = `meta:${key}`;
        const existing = await read<string>(metaKey);
        if (existing) return existing;
        const value = create();
        await keyv.set(metaKey, value);
        return value;
      });
    },

    getMeta(key) {
      return exclusive(() => read<string>(`meta:${key}`));
    },

    deleteMeta(key) {
      return exclusive(async () => {
        await keyv.delete(`meta:${key}`);
      });
    },

    sweepExpired(dropImages) {
      return exclusive(async () => {
        const current = Math.floor(now() / BUCKET_MS);
        let from = await read<number>(SWEPT_UNTIL);
        if (from === undefined) {
          // A new store: nothing can be listed in a bucket before this one.
          await keyv.set(SWEPT_UNTIL, current);
          return 0;
        }
        let deleted = 0;
        // Bounded per call, so a store left alone for months catches up in steps.
        for (let bucket = from; bucket <= current && bucket < from + 10_000; bucket += 1) {
          const listed = await read<string[]>(bucketKey(bucket));
          if (listed?.length) {
            const keys = listed.filter(
              (key) => !key.startsWith(OWNER_ENTRY) && !key.startsWith(IMAGE_ENTRY),
            );
            const images = listed.filter((key) => key.startsWith(IMAGE_ENTRY));
            if (images.length > 0) {
              await dropImages?.(images.map((key) => key.slice(IMAGE_ENTRY.length)));
            }
            await Promise.all(keys.map((key) => keyv.delete(key)));
            await dropFromOwners(listed.filter((key) => key.startsWith(OWNER_ENTRY)));
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
