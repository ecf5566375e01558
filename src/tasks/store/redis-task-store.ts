import KeyvRedis, { Keyv } from "@keyv/redis";
import type { RedisClient } from "../../redis/open-redis-client.js";
import { redisScript } from "../../redis/redis-script.js";
import { useKeyvCodec } from "./keyv-codec.js";
import { canTransition, isFinished, type TaskRecord, type TaskStatus } from "../task-record.js";
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

/*
 * Atomic steps, each one script, so that any number of replicas can share the
 * store. Records, images, idempotency keys and meta values are Keyv entries
 * (`<prefix>::task:<id>` holding `{"value": ..., "expires": ...}`); the
 * scripts read and write those same entries. The indexes are sorted sets:
 * `owner:<owner>` (an owner's tasks by creation), `owned:<status>:<owner>`
 * (the same, per status, for the task list), `unfinished` (tasks that must
 * have a place in the queue), `expiring` (`<id>|<owner>` by expiry time, what
 * the sweep takes out of the indexes) and `webhook-outbox` (finished tasks
 * whose webhook event is not queued yet, by the time they finished).
 */

/**
 * KEYS: task, owner index, unfinished index, idempotency key or "", sequence, owner's queued index.
 * ARGV: record, id, max per owner (0: none), idempotency entry, its TTL, task key prefix.
 * Indexes are ordered by a sequence every replica shares, so tasks created in
 * one millisecond keep their order.
 */
const CREATE = redisScript(`
if KEYS[4] ~= '' then
  local seen = redis.call('GET', KEYS[4])
  if seen then
    local entry = cjson.decode(seen).value
    if redis.call('EXISTS', ARGV[6] .. entry.taskId) == 1 then
      return {'seen', entry.taskId, entry.fingerprint}
    end
  end
end
local limit = tonumber(ARGV[3])
if limit > 0 and redis.call('ZCARD', KEYS[2]) >= limit then return {'owner_full'} end
local seq = redis.call('INCR', KEYS[5])
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], seq, ARGV[2])
redis.call('ZADD', KEYS[6], seq, ARGV[2])
redis.call('ZADD', KEYS[3], seq, ARGV[2])
if KEYS[4] ~= '' then redis.call('SET', KEYS[4], ARGV[4], 'PX', ARGV[5]) end
return {'created'}
`);

/**
 * KEYS: task, unfinished index, expiring index, owner index, the owner's index of the old
 * status, of the new one, webhook outbox.
 * ARGV: rev read, record, TTL or "", finished, expiring member, expiry time, id, into the
 * outbox, now, input images, input key prefix.
 * 1 written, 0 gone, -1 changed since read.
 */
const TRANSITION = redisScript(`
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
if tostring(cjson.decode(raw).value.rev) ~= ARGV[1] then return -1 end
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
if KEYS[5] ~= KEYS[6] then
  local seq = redis.call('ZSCORE', KEYS[4], ARGV[7])
  redis.call('ZREM', KEYS[5], ARGV[7])
  if seq then redis.call('ZADD', KEYS[6], seq, ARGV[7]) end
end
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[7])
  if ARGV[3] ~= '' then redis.call('ZADD', KEYS[3], ARGV[6], ARGV[5]) end
  if ARGV[8] == '1' then redis.call('ZADD', KEYS[7], ARGV[9], ARGV[7]) end
  for i = 0, tonumber(ARGV[10]) - 1 do redis.call('DEL', ARGV[11] .. i) end
end
return 1
`);

/** Image keys per task the sweep deletes: `n` is at most 10. */
const MAX_IMAGES_PER_TASK = 10;
/** Input keys per task the sweep deletes: an edit takes at most 16 images and a mask. */
const MAX_INPUTS_PER_TASK = 17;

/** KEYS: expiring index, webhook outbox. Takes due tasks out of every index and deletes what is left of them. */
const SWEEP = redisScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local deleted = 0
for _, member in ipairs(due) do
  local bar = string.find(member, '|', 1, true)
  local id = string.sub(member, 1, bar - 1)
  local owner = string.sub(member, bar + 1)
  redis.call('ZREM', ARGV[3] .. 'owner:' .. owner, id)
  for _, status in ipairs({'queued', 'in_progress', 'completed', 'failed'}) do
    redis.call('ZREM', ARGV[3] .. 'owned:' .. status .. ':' .. owner, id)
  end
  redis.call('ZREM', KEYS[2], id)
  deleted = deleted + redis.call('DEL', ARGV[3] .. 'task:' .. id)
  for i = 0, ${MAX_IMAGES_PER_TASK - 1} do
    deleted = deleted + redis.call('DEL', ARGV[3] .. 'image:' .. id .. ':' .. i)
  end
  for i = 0, ${MAX_INPUTS_PER_TASK - 1} do
    deleted = deleted + redis.call('DEL', ARGV[3] .. 'input:' .. id .. ':' .. i)
  end
  redis.call('ZREM', KEYS[1], member)
end
return {#due, deleted}
`);

/**
 * KEYS: owner index, the index to page (the owner's, or one of its status).
 * ARGV: the task the page follows or "", else the highest sequence (exclusive) or "", count.
 * The page's ids and sequences, newest first; nil when that task is not the owner's.
 */
const LIST = redisScript(`
local max = ARGV[2]
if ARGV[1] ~= '' then
  local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if not seq then return false end
  max = '(' .. seq
end
if max == '' then max = '+inf' end
return redis.call('ZREVRANGEBYSCORE', KEYS[2], max, '-inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
`);

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

    async sweepExpired() {
      let deleted = 0;
      // Bounded per call and per script run, so one call never holds Redis for long.
      for (let round = 0; round < 20; round += 1) {
        const [due, gone] = (await SWEEP.run(
          client,
          [EXPIRING, OUTBOX],
          [now(), 200, base],
        )) as number[];
        deleted += gone ?? 0;
        if ((due ?? 0) < 200) break;
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
