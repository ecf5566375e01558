import KeyvRedis, { Keyv } from "@keyv/redis";
import type { RedisClient } from "../../redis/open-redis-client.js";
import { useKeyvCodec } from "./keyv-codec.js";
import { CREATE, LIST, SWEEP, TRANSITION } from "./redis-task-scripts.js";
import {
  canTransition,
  imageKeysOf,
  isFinished,
  type TaskRecord,
  type TaskStatus,
} from "../task-record.js";
import type {
  CreateResult,
  Idempotency,
  IdempotentAnswer,
  OwnedPage,
  TaskStore,
} from "./task-store.js";

/** A record as kept in Redis: `rev` counts its writes, the version `transition` compares. */
type StoredRecord = TaskRecord & { rev: number };

interface IdempotencyEntry {
  taskId: string;
  fingerprint: string;
}

/** Options of {@link createRedisTaskStore}. */
export interface RedisTaskStoreOptions {
  client: RedisClient;
  /** The deployment's namespace: every key starts with `<prefix>::`. */
  prefix: string;
  idempotencyTtlMs: number;
  /** Whether {@link TaskStore.close} closes the client (the store opened it). */
  ownsClient?: boolean;
  now?: () => number;
}

/**
 * The {@link TaskStore} many replicas share: Keyv on `@keyv/redis` for the
 * entries, Lua scripts for the compare-and-set steps and the indexes.
 */
export function createRedisTaskStore(options: RedisTaskStoreOptions): TaskStore {
  const { client, prefix } = options;
  const now = options.now ?? Date.now;
  // Keyv errors must reach the caller (503 store_unavailable), not become "not found".
  const keyv = new Keyv({
    store: new KeyvRedis(client, { throwOnErrors: true, throwOnConnectError: true }),
    namespace: prefix,
    useKeyPrefix: false,
    throwOnErrors: true,
  });
  keyv.on("error", () => undefined); // thrown to the caller as well; nothing to add here
  // Keyv's format at native JSON's cost: every read of a record or an image parses one.
  const codec = useKeyvCodec(keyv);
  const base = `${prefix}::`;
  const raw = (key: string) => `${base}${key}`;
  const taskKey = (id: string) => `task:${id}`;
  const imageKey = (id: string, index: number) => `image:${id}:${index}`;
  const inputKey = (id: string, index: number) => `input:${id}:${index}`;
  const idemKey = (owner: string, key: string) => `idem:${owner}:${key}`;
  const ownerIndex = (owner: string) => raw(`owner:${owner}`);
  const statusIndex = (status: TaskStatus, owner: string) => raw(`owned:${status}:${owner}`);
  const UNFINISHED = raw("unfinished");
  const EXPIRING = raw("expiring");
  const OUTBOX = raw("webhook-outbox");
  /** Image store keys of finished tasks by expiry time: what the sweep hands on to delete. */
  const EXPIRING_IMAGES = raw("expiring-images");
  const serialize = (value: unknown, expires?: number) => codec.serialize({ value, expires });

  const readStored = async (id: string) =>
    (await keyv.get(taskKey(id))) as StoredRecord | undefined;
  const strip = (record: StoredRecord | undefined): TaskRecord | undefined => {
    if (!record) return undefined;
    const { rev: _rev, ...rest } = record;
    return rest;
  };

  const findIdempotent = async (
    owner: string,
    idempotency: Idempotency,
  ): Promise<IdempotentAnswer | undefined> => {
    const seen = (await keyv.get(idemKey(owner, idempotency.key))) as IdempotencyEntry | undefined;
    const earlier = seen && strip(await readStored(seen.taskId));
    if (!seen || !earlier) return undefined;
    return seen.fingerprint === idempotency.fingerprint
      ? { kind: "replayed", record: earlier }
      : { kind: "conflict" };
  };

  return {
    persistent: true,

    get: async (id) => strip(await readStored(id)),

    findIdempotent,

    async create(record, { idempotency, maxPerOwner } = {}) {
      const stored: StoredRecord = { ...record, rev: 1 };
      const idemTtl = options.idempotencyTtlMs;
      const answer = (await CREATE.run(
        client,
        [
          raw(taskKey(record.id)),
          ownerIndex(record.owner),
          UNFINISHED,
          idempotency ? raw(idemKey(record.owner, idempotency.key)) : "",
          raw("sequence"),
          statusIndex(record.status, record.owner),
        ],
        [
          serialize(stored),
          record.id,
          maxPerOwner ?? 0,
          idempotency
            ? serialize(
                { taskId: record.id, fingerprint: idempotency.fingerprint },
                now() + idemTtl,
              )
            : "",
          idemTtl,
          raw(taskKey("")),
        ],
      )) as string[];
      switch (answer[0]) {
        case "created":
          return { kind: "created", record } satisfies CreateResult;
        case "owner_full":
          return { kind: "owner_full" };
        default: {
          const earlier = strip(await readStored(answer[1] as string));
          if (!earlier) return this.create(record, { idempotency, maxPerOwner }); // expired meanwhile
          return answer[2] === idempotency?.fingerprint
            ? { kind: "replayed", record: earlier }
            : { kind: "conflict" };
        }
      }
    },

    async transition(id, expected, patch, { ttlMs, attempts } = {}) {
      if (!canTransition(expected, patch.status)) {
        throw new Error(`illegal task transition ${expected} -> ${patch.status}`);
      }
      // Read, merge, write if nothing changed in between; else read again.
      for (;;) {
        const current = await readStored(id);
        if (!current || current.status !== expected) return undefined;
        if (attempts !== undefined && current.attempts !== attempts) return undefined;
        const next: StoredRecord = { ...current, ...patch, rev: current.rev + 1 };
        for (const key of Object.keys(patch) as Array<keyof TaskRecord>) {
          if (patch[key] === undefined) delete next[key];
        }
        const finished = isFinished(next.status);
        const ttl = finished ? ttlMs : undefined;
        const written = (await TRANSITION.run(
          client,
          [
            raw(taskKey(id)),
            UNFINISHED,
            EXPIRING,
            ownerIndex(next.owner),
            statusIndex(current.status, next.owner),
            statusIndex(next.status, next.owner),
            OUTBOX,
            EXPIRING_IMAGES,
          ],
          [
            current.rev,
            serialize(next, ttl === undefined ? undefined : now() + ttl),
            ttl ?? "",
            finished ? "1" : "0",
            `${id}|${next.owner}`,
            now() + (ttl ?? 0),
            id,
            finished && next.webhook ? "1" : "0",
            now(),
            next.inputs?.length ?? 0,
            raw(`input:${id}:`),
            ...(finished ? imageKeysOf(next) : []),
          ],
        )) as number;
        if (written === 1) return strip(next);
        if (written === 0) return undefined;
      }
    },

    async listUnfinished() {
      const ids = await client.zRange(UNFINISHED, 0, -1);
      if (ids.length === 0) return [];
      const records = (await keyv.get(ids.map(taskKey))) as Array<StoredRecord | undefined>;
      return records
        .map(strip)
        .filter((record): record is TaskRecord => Boolean(record) && !isFinished(record!.status))
        .sort((a, b) => a.created - b.created);
    },

    async listOwned(owner, { limit, after, status, nowSec }) {
      const index = status ? statusIndex(status, owner) : ownerIndex(owner);
      const records: TaskRecord[] = [];
      let from: { after?: string; max?: string } = { after };
      // Records that expired before the sweep took them out of the index are skipped.
      while (records.length <= limit) {
        const want = limit + 1 - records.length;
        const page = (await LIST.run(
          client,
          [ownerIndex(owner), index],
          [from.after ?? "", from.max ?? "", want],
        )) as string[] | null;
        if (page === null) return undefined;
        const ids = page.filter((_, at) => at % 2 === 0);
        if (ids.length === 0) break;
        const found = (await keyv.get(ids.map(taskKey))) as Array<StoredRecord | undefined>;
        for (const stored of found) {
          const record = strip(stored);
          if (!record || (status !== undefined && record.status !== status)) continue;
          if (isFinished(record.status) && (record.expires_at ?? Infinity) <= nowSec) continue;
          records.push(record);
        }
        if (ids.length < want) break;
        from = { max: `(${page[page.length - 1]}` };
      }
      return { records: records.slice(0, limit), hasMore: records.length > limit } as OwnedPage;
    },

    async putImage(id, index, bytes, ttlMs) {
      await keyv.set(imageKey(id, index), bytes.toString("base64"), ttlMs);
    },

    async getImage(id, index) {
      const stored = (await keyv.get(imageKey(id, index))) as string | undefined;
      return stored === undefined ? undefined : Buffer.from(stored, "base64");
    },

    async deleteImages(id, count) {
      if (count === 0) return;
      await client.del(Array.from({ length: count }, (_, index) => raw(imageKey(id, index))));
    },

    async putInput(id, index, bytes, ttlMs) {
      await keyv.set(inputKey(id, index), bytes.toString("base64"), ttlMs);
    },

    async getInput(id, index) {
      const stored = (await keyv.get(inputKey(id, index))) as string | undefined;
      return stored === undefined ? undefined : Buffer.from(stored, "base64");
    },

    async deleteInputs(id, count) {
      if (count === 0) return;
      await client.del(Array.from({ length: count }, (_, index) => raw(inputKey(id, index))));
    },

    async webhookOutbox(limit) {
      const entries = await client.zRangeWithScores(OUTBOX, 0, limit - 1);
      return entries.map(({ value, score }) => ({ id: value, sinceMs: score }));
    },

    async clearWebhookOutbox(id) {
      await client.zRem(OUTBOX, id);
    },

    async getOrSetMeta(key, create) {
      const metaKey = `meta:${key}`;
      // Several replicas may start at once: the first value written wins for all.
      await client.set(raw(metaKey), serialize(create()), { condition: "NX" });
      return (await keyv.get(metaKey)) as string;
    },

    getMeta: async (key) => (await keyv.get(`meta:${key}`)) as string | undefined,
    deleteMeta: async (key) => void (await client.del(raw(`meta:${key}`))),

    async sweepExpired(dropImages) {
      let deleted = 0;
      // Bounded per call and per script run, so one call never holds Redis for long.
      for (let round = 0; round < 20; round += 1) {
        const [due, gone, images] = (await SWEEP.run(
          client,
          [EXPIRING, OUTBOX, EXPIRING_IMAGES],
          [now(), 200, base],
        )) as [number, number, string[]];
        deleted += gone ?? 0;
        if (images?.length) await dropImages?.(images);
        if ((due ?? 0) < 200 && (images?.length ?? 0) < 200) break;
      }
      return deleted;
    },

    async ping() {
      await client.ping();
    },

    async close() {
      if (options.ownsClient) await client.close();
    },
  };
}
