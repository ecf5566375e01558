import type Keyv from "keyv";
import {
  isFinished,
  transitionRecord,
  type TaskRecord,
  type TaskStatus,
} from "../core/task-record.js";
import { expireLater, expireWithTask, forgetExpiry, sweepBuckets } from "./keyv-expiry-buckets.js";
import {
  exclusive,
  idemKey,
  OUTBOX,
  ownerKey,
  read,
  readOwner,
  taskKey,
  UNFINISHED,
  type KeyvTaskState,
} from "./keyv-task-state.js";
import type {
  CreateOptions,
  CreateResult,
  Idempotency,
  IdempotentAnswer,
  OutboxEntry,
  OwnedPage,
  OwnedQuery,
  TaskStore,
  TransitionOptions,
} from "../core/task-store.js";

interface IdempotencyEntry {
  taskId: string;
  fingerprint: string;
}

/** Options of {@link createKeyvTaskStore}. */
export interface KeyvTaskStoreOptions {
  persistent: boolean;
  idempotencyTtlMs: number;
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
  const s: KeyvTaskState = {
    keyv,
    now: options.now ?? Date.now,
    idempotencyTtlMs: options.idempotencyTtlMs,
    chain: Promise.resolve(),
  };
  return {
    persistent: options.persistent,
    get: (id) => read<TaskRecord>(keyv, taskKey(id)),
    findIdempotent: (owner, idempotency) => findIdempotent(keyv, owner, idempotency),
    create: (record, createOptions = {}) => exclusive(s, () => create(s, record, createOptions)),
    transition: (id, expected, patch, transitionOptions = {}) =>
      exclusive(s, () => transition(s, id, expected, patch, transitionOptions)),
    delete: (id) => exclusive(s, () => deleteTask(s, id)),
    listUnfinished: () => listUnfinished(keyv),
    listOwned: (owner, query) => exclusive(s, () => listOwned(keyv, owner, query)),

    async webhookOutbox(limit): Promise<OutboxEntry[]> {
      return (await readOutbox(keyv)).slice(0, limit).map(([id, sinceMs]) => ({ id, sinceMs }));
    },
    clearWebhookOutbox: (id) => exclusive(s, () => clearWebhookOutbox(keyv, id)),

    getOrSetMeta: (key, createValue) => exclusive(s, () => getOrSetMeta(keyv, key, createValue)),
    sweepExpired: (dropImages) => exclusive(s, () => sweepBuckets(s, dropImages)),

    async ping() {
      await keyv.get("meta:ping");
    },
    async close() {
      await s.chain;
      await keyv.disconnect();
    },
  };
}

const readUnfinished = async (keyv: Keyv) => (await read<string[]>(keyv, UNFINISHED)) ?? [];
const readOutbox = async (keyv: Keyv) => (await read<Array<[string, number]>>(keyv, OUTBOX)) ?? [];

async function readMany<T>(keyv: Keyv, keys: string[]): Promise<Array<T | undefined>> {
  return keys.length === 0 ? [] : ((await keyv.get(keys)) as Array<T | undefined>);
}

async function findIdempotent(
  keyv: Keyv,
  owner: string,
  idempotency: Idempotency,
): Promise<IdempotentAnswer | undefined> {
  const seen = await read<IdempotencyEntry>(keyv, idemKey(owner, idempotency.key));
  const earlier = seen && (await read<TaskRecord>(keyv, taskKey(seen.taskId)));
  if (!seen || !earlier) return undefined;
  return seen.fingerprint === idempotency.fingerprint
    ? { kind: "replayed", record: earlier }
    : { kind: "conflict" };
}

/** `create`'s body: the task, its owner's index, the unfinished list and its idempotency key. */
async function create(
  s: KeyvTaskState,
  record: TaskRecord,
  { idempotency, maxPerOwner }: CreateOptions,
): Promise<CreateResult> {
  const { keyv } = s;
  if (idempotency) {
    const answer = await findIdempotent(keyv, record.owner, idempotency);
    if (answer) return answer;
  }
  const owned = await readOwner(keyv, record.owner);
  if (maxPerOwner !== undefined && owned.length >= maxPerOwner) return { kind: "owner_full" };
  await keyv.set(taskKey(record.id), record);
  owned.push([record.id, record.created, record.status]);
  await keyv.set(ownerKey(record.owner), owned);
  const unfinished = await readUnfinished(keyv);
  unfinished.push(record.id);
  await keyv.set(UNFINISHED, unfinished);
  if (idempotency) {
    const key = idemKey(record.owner, idempotency.key);
    await keyv.set(
      key,
      { taskId: record.id, fingerprint: idempotency.fingerprint } satisfies IdempotencyEntry,
      s.idempotencyTtlMs,
    );
    await expireLater(s, [key], s.idempotencyTtlMs);
  }
  return { kind: "created", record };
}

/** `transition`'s body: the compare-and-set, the owner's index, and what a finished task frees. */
async function transition(
  s: KeyvTaskState,
  id: string,
  expected: TaskStatus,
  patch: Partial<TaskRecord> & { status: TaskStatus },
  { ttlMs, attempts }: TransitionOptions,
): Promise<TaskRecord | undefined> {
  const { keyv } = s;
  const current = await read<TaskRecord>(keyv, taskKey(id));
  const next = transitionRecord(current, expected, patch, attempts);
  if (!next) return undefined;
  const finished = isFinished(next.status);
  await keyv.set(taskKey(id), next, finished ? ttlMs : undefined);
  const bucket = finished ? await finish(s, next, ttlMs) : undefined;
  if (next.status !== expected) await reindexOwner(keyv, next, bucket);
  return next;
}

/** Writes a task's new status (and, finished, its expiry bucket) into its owner's index. */
async function reindexOwner(keyv: Keyv, next: TaskRecord, bucket?: number): Promise<void> {
  const owned = await readOwner(keyv, next.owner);
  // From the newest: a task that moves on is almost always one of the last made, and an
  // owner may hold many thousands of finished ones.
  const at = owned.findLastIndex(([other]) => other === next.id);
  if (at !== -1) {
    const created = owned[at]![1];
    owned[at] =
      bucket === undefined
        ? [next.id, created, next.status]
        : [next.id, created, next.status, bucket];
    await keyv.set(ownerKey(next.owner), owned);
  }
}

/**
 * A finished task leaves the unfinished list, enters the outbox, expires;
 * resolves the expiry bucket it is listed in.
 */
async function finish(
  s: KeyvTaskState,
  next: TaskRecord,
  ttlMs: number | undefined,
): Promise<number | undefined> {
  const { keyv, now } = s;
  const { id } = next;
  await dropUnfinished(keyv, id);
  if (next.webhook) {
    const outbox = await readOutbox(keyv);
    outbox.push([id, now()]);
    await keyv.set(OUTBOX, outbox);
  }
  return ttlMs === undefined ? undefined : expireWithTask(s, next, ttlMs);
}

async function dropUnfinished(keyv: Keyv, id: string): Promise<void> {
  const unfinished = await readUnfinished(keyv);
  const at = unfinished.indexOf(id);
  if (at !== -1) {
    unfinished.splice(at, 1);
    await keyv.set(UNFINISHED, unfinished);
  }
}

/** `delete`'s body: the record, its owner entry, the unfinished list, the outbox, its bucket. */
async function deleteTask(s: KeyvTaskState, id: string): Promise<TaskRecord | undefined> {
  const { keyv } = s;
  const record = await read<TaskRecord>(keyv, taskKey(id));
  if (!record) return undefined;
  await keyv.delete(taskKey(id));
  const owned = await readOwner(keyv, record.owner);
  const at = owned.findIndex(([other]) => other === id);
  const bucket = at === -1 ? undefined : owned[at]![3];
  if (at !== -1) {
    const kept = owned.filter((_, index) => index !== at);
    if (kept.length > 0) await keyv.set(ownerKey(record.owner), kept);
    else await keyv.delete(ownerKey(record.owner));
  }
  await dropUnfinished(keyv, id);
  await clearWebhookOutbox(keyv, id);
  if (bucket !== undefined) await forgetExpiry(s, record, bucket);
  return record;
}

async function listUnfinished(keyv: Keyv): Promise<TaskRecord[]> {
  const ids = await readUnfinished(keyv);
  const records = await Promise.all(ids.map((id) => read<TaskRecord>(keyv, taskKey(id))));
  return records
    .filter((record): record is TaskRecord => Boolean(record) && !isFinished(record!.status))
    .sort((a, b) => a.created - b.created);
}

/**
 * `listOwned`'s body: a page walked from `after` (or the newest, or the
 * oldest with `asc`) along the owner's index, which runs oldest first.
 */
async function listOwned(
  keyv: Keyv,
  owner: string,
  { limit, after, status, nowSec, order }: OwnedQuery,
): Promise<OwnedPage | undefined> {
  const owned = await readOwner(keyv, owner);
  const step = order === "asc" ? 1 : -1;
  let at = step === 1 ? 0 : owned.length - 1;
  if (after !== undefined) {
    const from = owned.findIndex(([id]) => id === after);
    if (from === -1) return undefined;
    at = from + step;
  }
  const records: TaskRecord[] = [];
  // The index's status spares reading records of other statuses.
  while (at >= 0 && at < owned.length && records.length <= limit) {
    const batch: string[] = [];
    for (; at >= 0 && at < owned.length && batch.length < limit + 1 - records.length; at += step) {
      const [id, , indexed] = owned[at]!;
      if (status === undefined || indexed === undefined || indexed === status) batch.push(id);
    }
    for (const record of await readMany<TaskRecord>(keyv, batch.map(taskKey))) {
      if (!record || (status !== undefined && record.status !== status)) continue;
      if (isFinished(record.status) && (record.expires_at ?? Infinity) <= nowSec) continue;
      records.push(record);
    }
  }
  return { records: records.slice(0, limit), hasMore: records.length > limit };
}

async function clearWebhookOutbox(keyv: Keyv, id: string): Promise<void> {
  const outbox = await readOutbox(keyv);
  const kept = outbox.filter(([other]) => other !== id);
  if (kept.length !== outbox.length) await keyv.set(OUTBOX, kept);
}

/** `getOrSetMeta`'s body: the first value set wins. */
async function getOrSetMeta(keyv: Keyv, key: string, createValue: () => string): Promise<string> {
  const metaKey = `meta:${key}`;
  const existing = await read<string>(keyv, metaKey);
  if (existing) return existing;
  const value = createValue();
  await keyv.set(metaKey, value);
  return value;
}
