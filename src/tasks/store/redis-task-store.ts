import Keyv from "keyv";
import type { RedisClient } from "../../redis/open-redis-client.js";
import type { RedisStoreKeys } from "../../redis/redis-keys.js";
import { createKeyvCodec, type KeyvCodec, type KeyvEntry } from "./keyv-codec.js";
import { CREATE, TRANSITION } from "./redis-task-scripts.js";
import { listOwnedTasks, listWebhookOutbox } from "./redis-task-lists.js";
import { deleteRedisTask } from "./redis-task-delete.js";
import { sweepExpired } from "./redis-task-sweep.js";
import {
  confirmOnReplicas,
  createReplicaWaiter,
  keepRunStepOnReplicas,
  stepToKeep,
  type ReplicaConfirmation,
  type ReplicaWaiter,
} from "./redis-replica-wait.js";
import { createRecentEntries, type RecentEntries } from "./recent-entries.js";
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
  /** The backend's client (closed by the backend, not by the store). */
  client: RedisClient;
  /** Where each record, key and index lives (see `redis/redis-keys.ts`). */
  keys: RedisStoreKeys;
  idempotencyTtlMs: number;
  /**
   * `store.minReplicas` and the wait for them (`WAIT`): a task they do not
   * confirm is cancelled and `create` rejects. None by default.
   */
  replicas?: ReplicaConfirmation;
  now?: () => number;
}

/** What the store's steps share: the client, the entry codec, and the keys. */
interface RedisTaskState {
  client: RedisClient;
  codec: KeyvCodec;
  replicas: ReplicaConfirmation | undefined;
  now: () => number;
  idempotencyTtlMs: number;
  keys: RedisStoreKeys;
  /** Where a transition starts from (see {@link createRecentEntries}). */
  recent: RecentEntries;
  /** With `replicas`: the `WAIT` runs' claims and ends share (see {@link createReplicaWaiter}). */
  stepWaiter: ReplicaWaiter | undefined;
}

/**
 * The {@link TaskStore} many replicas share: entries in Keyv's format
 * (`{"value": ..., "expires": ...}`, as earlier releases wrote them through
 * Keyv), Lua scripts for the compare-and-set steps and the indexes. On a
 * cluster every key of `keys` sits in one slot (the prefix is hash-tagged).
 */
export function createRedisTaskStore(options: RedisTaskStoreOptions): TaskStore {
  const { client, keys } = options;
  const s: RedisTaskState = {
    client,
    // Keyv's format at native JSON's cost: every read of a record parses one.
    codec: createKeyvCodec(new Keyv()),
    replicas: options.replicas,
    now: options.now ?? Date.now,
    idempotencyTtlMs: options.idempotencyTtlMs,
    keys,
    recent: createRecentEntries(),
    stepWaiter:
      options.replicas &&
      createReplicaWaiter(client, keys.unfinished, options.replicas.minReplicas),
  };
  return {
    persistent: true,
    get: async (id) => strip(await readStored(s, id)),
    findIdempotent: (owner, idempotency) => findIdempotent(s, owner, idempotency),
    create: (record, createOptions = {}) => create(s, record, createOptions),
    transition: (id, expected, patch, transitionOptions = {}) =>
      transition(s, id, expected, patch, transitionOptions),
    delete: async (id) => {
      s.recent.drop(id);
      return strip(
        await deleteRedisTask({ client, keys, read: (taskId) => readStored(s, taskId) }, id),
      );
    },
    listUnfinished: () => listUnfinished(s),
    listOwned: (owner, query) =>
      listOwnedTasks(
        { client, keys, read: async (ids) => (await readMany(s, ids)).map(strip) },
        owner,
        query,
      ),

    webhookOutbox: (limit) => listWebhookOutbox(client, keys.webhookOutbox, limit),
    async clearWebhookOutbox(id) {
      await client.zrem(keys.webhookOutbox, id);
    },

    getOrSetMeta: (key, createValue) => getOrSetMeta(s, key, createValue),
    sweepExpired: (dropImages) =>
      sweepExpired(
        {
          client,
          now: s.now,
          expiring: keys.expiring,
          expiringImages: keys.expiringImages,
          outbox: keys.webhookOutbox,
          keysOfTask: (id, owner) => [
            keys.task(id),
            keys.owner(owner),
            ...STATUSES.map((status) => keys.owned(status, owner)),
          ],
        },
        dropImages,
      ),

    async ping() {
      await client.ping();
    },
    // The client is the backend's: it closes it with the bus and the queues.
    async close() {},
  };
}

const serialize = (s: RedisTaskState, value: unknown, expires?: number) =>
  s.codec.serialize({ value, expires });

/** An entry's value, or undefined when absent or past its `expires` (as Keyv reads it). */
function valueOf(s: RedisTaskState, text: string | null | undefined): unknown {
  if (!text) return undefined;
  const entry = s.codec.deserialize<KeyvEntry>(text);
  if (typeof entry.expires === "number" && entry.expires <= s.now()) return undefined;
  return entry.value;
}

/** Reads a record; an unfinished one's entry is kept for its next transition. */
async function readStored(s: RedisTaskState, id: string): Promise<StoredRecord | undefined> {
  const text = await s.client.get(s.keys.task(id));
  const record = valueOf(s, text) as StoredRecord | undefined;
  if (record && !isFinished(record.status)) s.recent.keep(id, text!);
  else s.recent.drop(id);
  return record;
}

async function readMany(
  s: RedisTaskState,
  ids: string[],
): Promise<Array<StoredRecord | undefined>> {
  const texts = await s.client.mget(ids.map((id) => s.keys.task(id)));
  return texts.map((text) => valueOf(s, text) as StoredRecord | undefined);
}

function strip(record: StoredRecord | undefined): TaskRecord | undefined {
  if (!record) return undefined;
  const { rev: _rev, ...rest } = record;
  return rest;
}

async function findIdempotent(
  s: RedisTaskState,
  owner: string,
  idempotency: Idempotency,
): Promise<IdempotentAnswer | undefined> {
  const text = await s.client.get(s.keys.idempotency(owner, idempotency.key));
  const seen = valueOf(s, text) as IdempotencyEntry | undefined;
  const earlier = seen && strip(await readStored(s, seen.taskId));
  if (!seen || !earlier) return undefined;
  return seen.fingerprint === idempotency.fingerprint
    ? { kind: "replayed", record: earlier }
    : { kind: "conflict" };
}

async function create(
  s: RedisTaskState,
  record: TaskRecord,
  options: CreateOptions,
  staleTaskId = "",
): Promise<CreateResult> {
  const { idempotency, maxPerOwner } = options;
  const stored: StoredRecord = { ...record, rev: 1 };
  const idemTtl = s.idempotencyTtlMs;
  const { keys } = s;
  const answer = (await CREATE.run(
    s.client,
    [
      keys.task(record.id),
      keys.owner(record.owner),
      keys.unfinished,
      // With no key, a stand-in in the deployment's slot (a cluster refuses a key elsewhere).
      idempotency ? keys.idempotency(record.owner, idempotency.key) : keys.noIdempotency,
      keys.sequence,
      keys.owned(record.status, record.owner),
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
      staleTaskId,
    ],
  )) as string[];
  switch (answer[0]) {
    case "created":
      if (s.replicas) await confirmOnReplicas(s.replicas, created(s, record, idempotency));
      return { kind: "created", record };
    case "owner_full":
      return { kind: "owner_full" };
    default: {
      const earlier = strip(await readStored(s, answer[1] as string));
      // The task the key made expired meanwhile: the key may now make this one.
      if (!earlier) return create(s, record, options, answer[1]);
      return answer[2] === idempotency?.fingerprint
        ? { kind: "replayed", record: earlier }
        : { kind: "conflict" };
    }
  }
}

/**
 * What {@link confirmOnReplicas} needs of a task just created. Made as the create's answer
 * arrives (no await in between): the connection count it reads names that answer's connection.
 */
function created(s: RedisTaskState, record: TaskRecord, idempotency: Idempotency | undefined) {
  const waiter = s.stepWaiter!;
  return {
    ...{ client: s.client, key: s.keys.task(record.id), waiter, sentOn: waiter.connection() },
    async cancel(ttlMs: number) {
      await transition(
        s,
        record.id,
        "queued",
        {
          status: "failed",
          error: {
            code: "cancelled",
            message: "Redis replicas did not confirm the task in time; it was cancelled.",
            type: "cancelled",
          },
          completed_at: Math.floor(s.now() / 1000),
          expires_at: Math.floor((s.now() + ttlMs) / 1000),
          // The submitter was answered 503: no webhook for a task it never had.
          webhook: undefined,
        },
        { ttlMs },
      );
      // A retry with the same key makes a new task, not a replay of this one.
      if (idempotency) await s.client.del(s.keys.idempotency(record.owner, idempotency.key));
    },
  };
}

async function transition(
  s: RedisTaskState,
  id: string,
  expected: TaskStatus,
  patch: Partial<TaskRecord> & { status: TaskStatus },
  { ttlMs, attempts }: TransitionOptions,
): Promise<TaskRecord | undefined> {
  // Merge into the entry last seen, or read; write if nothing changed in between; else read again.
  let text = s.recent.get(id);
  for (;;) {
    const known = text !== undefined;
    const current = (known ? valueOf(s, text) : await readStored(s, id)) as
      StoredRecord | undefined;
    const next = transitionRecord(current, expected, patch, attempts);
    if (!current || !next) {
      // What this process saw last may be behind: only the record as read now says no.
      if (!known) return undefined;
      text = undefined;
      continue;
    }
    next.rev = current.rev + 1;
    const finished = isFinished(next.status);
    const ttl = finished ? ttlMs : undefined;
    const nextText = serialize(s, next, ttl === undefined ? undefined : s.now() + ttl);
    const written = await writeTransition(s, current, next, nextText, ttl);
    if (written === 1 && !finished) s.recent.keep(id, nextText);
    else s.recent.drop(id);
    const waiter = written === 1 ? s.stepWaiter : undefined;
    const step = waiter && stepToKeep(current, next, attempts);
    if (waiter && step) {
      const kept = keepRunStepOnReplicas(waiter, {
        ...{ client: s.client, key: s.keys.task(id), text: nextText, sentOn: waiter.connection() },
        isBefore: (now) => isSameRecord(valueOf(s, now) as StoredRecord | undefined, current),
        ...(next.attempts === current.attempts && {
          rewrite: async () => (await writeTransition(s, current, next, nextText, ttl)) === 1,
        }),
      });
      if (step === "end") kept.catch(() => undefined);
      else return (await kept) ? strip(next) : undefined;
    }
    if (written === 1) return strip(next);
    if (written === 0) return undefined;
    text = undefined;
  }
}

/** Whether `stored` is `record` as it was (the same write of it). */
const isSameRecord = (stored: StoredRecord | undefined, record: StoredRecord) =>
  stored?.rev === record.rev &&
  stored.status === record.status &&
  stored.attempts === record.attempts;

/**
 * Runs the TRANSITION script (`nextText`: `next` as stored, `ttl` for a
 * finished one); resolves 1 written, 0 the task is gone, else `current`
 * changed meanwhile. Not async: `transition` awaits the script itself.
 */
function writeTransition(
  s: RedisTaskState,
  current: StoredRecord,
  next: StoredRecord,
  nextText: string,
  ttl: number | undefined,
): Promise<number> {
  const { id } = next;
  const finished = isFinished(next.status);
  const { keys } = s;
  return TRANSITION.run(
    s.client,
    [
      keys.task(id),
      keys.unfinished,
      keys.expiring,
      keys.owner(next.owner),
      keys.owned(current.status, next.owner),
      keys.owned(next.status, next.owner),
      keys.webhookOutbox,
      keys.expiringImages,
    ],
    [
      current.rev,
      nextText,
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

async function listUnfinished(s: RedisTaskState): Promise<TaskRecord[]> {
  const ids = await s.client.zrange(s.keys.unfinished, 0, -1);
  if (ids.length === 0) return [];
  const records = await readMany(s, ids);
  return records
    .map(strip)
    .filter((record): record is TaskRecord => Boolean(record) && !isFinished(record!.status))
    .sort((a, b) => a.created - b.created);
}

async function getOrSetMeta(
  s: RedisTaskState,
  key: string,
  createValue: () => string,
): Promise<string> {
  const metaKey = s.keys.meta(key);
  // Several replicas may start at once: the first value written wins for all.
  await s.client.set(metaKey, serialize(s, createValue()), "NX");
  return valueOf(s, await s.client.get(metaKey)) as string;
}

/** Every status an owner has an index of. */
const STATUSES: readonly TaskStatus[] = ["queued", "in_progress", "completed", "failed"];
