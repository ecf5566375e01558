import KeyvRedis, { Keyv } from "@keyv/redis";
import type { RedisClient } from "../../redis/open-redis-client.js";
import { useKeyvCodec, type KeyvCodec } from "./keyv-codec.js";
import { CREATE, LIST, SWEEP, TRANSITION } from "./redis-task-scripts.js";
import {
  imageKeysOf,
  isFinished,
  transitionRecord,
  type TaskRecord,
  type TaskStatus,
} from "../core/task-record.js";
import type {
  CreateOptions,
  CreateResult,
  Idempotency,
  IdempotentAnswer,
  OwnedPage,
  OwnedQuery,
  TaskStore,
  TransitionOptions,
} from "../core/task-store.js";

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

/** What the store's steps share: the client, Keyv on it, and the index keys. */
interface RedisTaskState {
  client: RedisClient;
  keyv: Keyv;
  codec: KeyvCodec;
  now: () => number;
  idempotencyTtlMs: number;
  /** `<prefix>::`, what every key starts with. */
  base: string;
  unfinished: string;
  expiring: string;
  outbox: string;
  /** Image store keys of finished tasks by expiry time: what the sweep hands on to delete. */
  expiringImages: string;
}

/**
 * The {@link TaskStore} many replicas share: Keyv on `@keyv/redis` for the
 * entries, Lua scripts for the compare-and-set steps and the indexes.
 */
export function createRedisTaskStore(options: RedisTaskStoreOptions): TaskStore {
  const { client, prefix } = options;
  const keyv = openKeyv(client, prefix);
  const base = `${prefix}::`;
  const s: RedisTaskState = {
    client,
    keyv,
    // Keyv's format at native JSON's cost: every read of a record or an image parses one.
    codec: useKeyvCodec(keyv),
    now: options.now ?? Date.now,
    idempotencyTtlMs: options.idempotencyTtlMs,
    base,
    unfinished: `${base}unfinished`,
    expiring: `${base}expiring`,
    outbox: `${base}webhook-outbox`,
    expiringImages: `${base}expiring-images`,
  };
  return {
    persistent: true,
    get: async (id) => strip(await readStored(keyv, id)),
    findIdempotent: (owner, idempotency) => findIdempotent(keyv, owner, idempotency),
    create: (record, createOptions = {}) => create(s, record, createOptions),
    transition: (id, expected, patch, transitionOptions = {}) =>
      transition(s, id, expected, patch, transitionOptions),
    listUnfinished: () => listUnfinished(s),
    listOwned: (owner, query) => listOwned(s, owner, query),

    async webhookOutbox(limit) {
      const entries = await client.zRangeWithScores(s.outbox, 0, limit - 1);
      return entries.map(({ value, score }) => ({ id: value, sinceMs: score }));
    },
    async clearWebhookOutbox(id) {
      await client.zRem(s.outbox, id);
    },

    getOrSetMeta: (key, createValue) => getOrSetMeta(s, key, createValue),
    sweepExpired: (dropImages) => sweepExpired(s, dropImages),

    async ping() {
      await client.ping();
    },
    async close() {
      if (options.ownsClient) await client.close();
    },
  };
}

function openKeyv(client: RedisClient, prefix: string): Keyv {
  // Keyv errors must reach the caller (503 store_unavailable), not become "not found".
  const keyv = new Keyv({
    store: new KeyvRedis(client, { throwOnErrors: true, throwOnConnectError: true }),
    namespace: prefix,
    useKeyPrefix: false,
    throwOnErrors: true,
  });
  keyv.on("error", () => undefined); // thrown to the caller as well; nothing to add here
  return keyv;
}

const raw = (s: RedisTaskState, key: string) => `${s.base}${key}`;
const taskKey = (id: string) => `task:${id}`;
const idemKey = (owner: string, key: string) => `idem:${owner}:${key}`;
const ownerIndex = (s: RedisTaskState, owner: string) => raw(s, `owner:${owner}`);
const statusIndex = (s: RedisTaskState, status: TaskStatus, owner: string) =>
  raw(s, `owned:${status}:${owner}`);
const serialize = (s: RedisTaskState, value: unknown, expires?: number) =>
  s.codec.serialize({ value, expires });

async function readStored(keyv: Keyv, id: string): Promise<StoredRecord | undefined> {
  return (await keyv.get(taskKey(id))) as StoredRecord | undefined;
}

function strip(record: StoredRecord | undefined): TaskRecord | undefined {
  if (!record) return undefined;
  const { rev: _rev, ...rest } = record;
  return rest;
}

async function findIdempotent(
  keyv: Keyv,
  owner: string,
  idempotency: Idempotency,
): Promise<IdempotentAnswer | undefined> {
  const seen = (await keyv.get(idemKey(owner, idempotency.key))) as IdempotencyEntry | undefined;
  const earlier = seen && strip(await readStored(keyv, seen.taskId));
  if (!seen || !earlier) return undefined;
  return seen.fingerprint === idempotency.fingerprint
    ? { kind: "replayed", record: earlier }
    : { kind: "conflict" };
}

async function create(
  s: RedisTaskState,
  record: TaskRecord,
  { idempotency, maxPerOwner }: CreateOptions,
): Promise<CreateResult> {
  const stored: StoredRecord = { ...record, rev: 1 };
  const idemTtl = s.idempotencyTtlMs;
  const answer = (await CREATE.run(
    s.client,
    [
      raw(s, taskKey(record.id)),
      ownerIndex(s, record.owner),
      s.unfinished,
      idempotency ? raw(s, idemKey(record.owner, idempotency.key)) : "",
      raw(s, "sequence"),
      statusIndex(s, record.status, record.owner),
    ],
    [
      serialize(s, stored),
      record.id,
      maxPerOwner ?? 0,
      idempotency
        ? serialize(
            s,
            { taskId: record.id, fingerprint: idempotency.fingerprint },
            s.now() + idemTtl,
          )
        : "",
      idemTtl,
      raw(s, taskKey("")),
    ],
  )) as string[];
  switch (answer[0]) {
    case "created":
      return { kind: "created", record };
    case "owner_full":
      return { kind: "owner_full" };
    default: {
      const earlier = strip(await readStored(s.keyv, answer[1] as string));
      if (!earlier) return create(s, record, { idempotency, maxPerOwner }); // expired meanwhile
      return answer[2] === idempotency?.fingerprint
        ? { kind: "replayed", record: earlier }
        : { kind: "conflict" };
    }
  }
}

async function transition(
  s: RedisTaskState,
  id: string,
  expected: TaskStatus,
  patch: Partial<TaskRecord> & { status: TaskStatus },
  { ttlMs, attempts }: TransitionOptions,
): Promise<TaskRecord | undefined> {
  // Read, merge, write if nothing changed in between; else read again.
  for (;;) {
    const current = await readStored(s.keyv, id);
    const next = transitionRecord(current, expected, patch, attempts);
    if (!current || !next) return undefined;
    next.rev = current.rev + 1;
    const written = await writeTransition(s, current, next, ttlMs);
    if (written === 1) return strip(next);
    if (written === 0) return undefined;
  }
}

/**
 * Runs the TRANSITION script; resolves 1 written, 0 the task is gone, else
 * `current` changed meanwhile. Not async: `transition` awaits the script itself.
 */
function writeTransition(
  s: RedisTaskState,
  current: StoredRecord,
  next: StoredRecord,
  ttlMs: number | undefined,
): Promise<number> {
  const { id } = next;
  const finished = isFinished(next.status);
  const ttl = finished ? ttlMs : undefined;
  return TRANSITION.run(
    s.client,
    [
      raw(s, taskKey(id)),
      s.unfinished,
      s.expiring,
      ownerIndex(s, next.owner),
      statusIndex(s, current.status, next.owner),
      statusIndex(s, next.status, next.owner),
      s.outbox,
      s.expiringImages,
    ],
    [
      current.rev,
      serialize(s, next, ttl === undefined ? undefined : s.now() + ttl),
      ttl ?? "",
      finished ? "1" : "0",
      `${id}|${next.owner}`,
      s.now() + (ttl ?? 0),
      id,
      finished && next.webhook ? "1" : "0",
      s.now(),
      ...(finished ? imageKeysOf(next) : []),
    ],
  ) as Promise<number>;
}

async function listUnfinished({ client, keyv, unfinished }: RedisTaskState): Promise<TaskRecord[]> {
  const ids = await client.zRange(unfinished, 0, -1);
  if (ids.length === 0) return [];
  const records = (await keyv.get(ids.map(taskKey))) as Array<StoredRecord | undefined>;
  return records
    .map(strip)
    .filter((record): record is TaskRecord => Boolean(record) && !isFinished(record!.status))
    .sort((a, b) => a.created - b.created);
}

async function listOwned(
  s: RedisTaskState,
  owner: string,
  { limit, after, status, nowSec }: OwnedQuery,
): Promise<OwnedPage | undefined> {
  const index = status ? statusIndex(s, status, owner) : ownerIndex(s, owner);
  const records: TaskRecord[] = [];
  let from: { after?: string; max?: string } = { after };
  // Records that expired before the sweep took them out of the index are skipped.
  while (records.length <= limit) {
    const want = limit + 1 - records.length;
    const page = (await LIST.run(
      s.client,
      [ownerIndex(s, owner), index],
      [from.after ?? "", from.max ?? "", want],
    )) as string[] | null;
    if (page === null) return undefined;
    const ids = page.filter((_, at) => at % 2 === 0);
    if (ids.length === 0) break;
    const found = (await s.keyv.get(ids.map(taskKey))) as Array<StoredRecord | undefined>;
    for (const stored of found) {
      const record = strip(stored);
      if (!record || (status !== undefined && record.status !== status)) continue;
      if (isFinished(record.status) && (record.expires_at ?? Infinity) <= nowSec) continue;
      records.push(record);
    }
    if (ids.length < want) break;
    from = { max: `(${page[page.length - 1]}` };
  }
  return { records: records.slice(0, limit), hasMore: records.length > limit };
}

async function getOrSetMeta(
  s: RedisTaskState,
  key: string,
  createValue: () => string,
): Promise<string> {
  const metaKey = `meta:${key}`;
  // Several replicas may start at once: the first value written wins for all.
  await s.client.set(raw(s, metaKey), serialize(s, createValue()), { condition: "NX" });
  return (await s.keyv.get(metaKey)) as string;
}

async function sweepExpired(
  s: RedisTaskState,
  dropImages: ((keys: string[]) => Promise<void>) | undefined,
): Promise<number> {
  let deleted = 0;
  // Bounded per call and per script run, so one call never holds Redis for long.
  for (let round = 0; round < 20; round += 1) {
    const [due, gone, images] = (await SWEEP.run(
      s.client,
      [s.expiring, s.outbox, s.expiringImages],
      [s.now(), 200, s.base],
    )) as [number, number, string[]];
    deleted += gone ?? 0;
    if (images?.length) await dropImages?.(images);
    if ((due ?? 0) < 200 && (images?.length ?? 0) < 200) break;
  }
  return deleted;
}
