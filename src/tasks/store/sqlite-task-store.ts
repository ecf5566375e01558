import type { Database } from "better-sqlite3";
import {
  imageKeysOf,
  isFinished,
  transitionRecord,
  type TaskRecord,
  type TaskStatus,
} from "../core/task-record.js";
import { prepareTaskStatements, type TaskRow, type TaskStatements } from "./sqlite-statements.js";
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

/** Options of {@link createSqliteTaskStore}. */
export interface SqliteTaskStoreOptions {
  idempotencyTtlMs: number;
  now?: () => number;
}

/** Rows the sweep deletes per transaction: each batch holds the event loop for a few ms. */
const SWEEP_BATCH = 500;

/**
 * The {@link TaskStore} on SQLite tables (`sqlite-schema.ts`), for the one
 * process that holds the file. The driver is synchronous, so every step
 * (create with its owner count and idempotency key; a transition with its
 * outbox entry; each batch of the sweep) runs as one
 * transaction that nothing else interleaves with: atomic on disk, and a
 * process killed at any instant leaves the step whole or not at all.
 */
export function createSqliteTaskStore(db: Database, options: SqliteTaskStoreOptions): TaskStore {
  const now = options.now ?? Date.now;
  const q = prepareTaskStatements(db);
  const steps: Steps = { q, now, idempotencyTtlMs: options.idempotencyTtlMs };
  const create = db.transaction(createStep(steps));
  const transition = db.transaction(transitionStep(steps));
  const remove = db.transaction(deleteStep(steps));
  const getOrSetMeta = db.transaction(metaStep(q));

  return {
    persistent: true,
    get: async (id) => readRecord(steps, id),
    findIdempotent: async (owner, idempotency) => findIdempotent(steps, owner, idempotency),
    create: async (record, createOptions = {}) => create.immediate(record, createOptions),
    transition: async (id, expected, patch, transitionOptions = {}) =>
      transition.immediate(id, expected, patch, transitionOptions),
    delete: async (id) => remove.immediate(id),

    async listUnfinished() {
      return (q.unfinished.all() as TaskRow[]).map((row) => JSON.parse(row.record) as TaskRecord);
    },

    listOwned: async (owner, query) => listOwned(q, owner, query, now()),

    async webhookOutbox(limit) {
      return (q.outbox.all(limit) as Array<{ id: string; sinceMs: number }>).map(
        ({ id, sinceMs }) => ({ id, sinceMs }),
      );
    },

    async clearWebhookOutbox(id) {
      q.clearOutbox.run(id);
    },

    getOrSetMeta: async (key, createValue) => getOrSetMeta.immediate(key, createValue),

    sweepExpired: async (dropImages) => sweep(db, q, now(), dropImages),

    async ping() {
      q.ping.get();
    },

    async close() {
      if (db.open) db.close();
    },
  };
}

/** What the store's steps share. */
interface Steps {
  q: TaskStatements;
  now: () => number;
  idempotencyTtlMs: number;
}

/** A task, unless it is gone or past the time the store deletes it at. */
function readRecord({ q, now }: Steps, id: string): TaskRecord | undefined {
  const row = q.getTask.get(id, now()) as TaskRow | undefined;
  return row ? (JSON.parse(row.record) as TaskRecord) : undefined;
}

function findIdempotent(
  steps: Steps,
  owner: string,
  idempotency: Idempotency,
): IdempotentAnswer | undefined {
  const seen = steps.q.getIdempotency.get(owner, idempotency.key, steps.now()) as
    { task_id: string; fingerprint: string } | undefined;
  const earlier = seen && readRecord(steps, seen.task_id);
  if (!seen || !earlier) return undefined;
  return seen.fingerprint === idempotency.fingerprint
    ? { kind: "replayed", record: earlier }
    : { kind: "conflict" };
}

/** `create`'s body: the task, its owner's count and its idempotency key (one transaction). */
function createStep(steps: Steps) {
  const { q, now } = steps;
  return (record: TaskRecord, { idempotency, maxPerOwner }: CreateOptions): CreateResult => {
    if (idempotency) {
      const answer = findIdempotent(steps, record.owner, idempotency);
      if (answer) return answer;
    }
    const held = (q.ownerTasks.get(record.owner) as number | undefined) ?? 0;
    if (maxPerOwner !== undefined && held >= maxPerOwner) return { kind: "owner_full" };
    q.insertTask.run({
      id: record.id,
      owner: record.owner,
      status: record.status,
      created: record.created,
      expires_at: record.expires_at ?? null,
      record: JSON.stringify(record),
    });
    q.addOwnerTasks.run(record.owner, 1);
    if (idempotency) {
      const expiresMs = now() + steps.idempotencyTtlMs;
      q.putIdempotency.run(
        record.owner,
        idempotency.key,
        record.id,
        idempotency.fingerprint,
        expiresMs,
      );
    }
    return { kind: "created", record };
  };
}

/**
 * `transition`'s body: the compare-and-set, the record with its indexed
 * columns, and for a task that finishes its outbox entry (one transaction).
 */
function transitionStep(steps: Steps) {
  const { q, now } = steps;
  return (
    id: string,
    expected: TaskStatus,
    patch: Partial<TaskRecord> & { status: TaskStatus },
    { ttlMs, attempts }: TransitionOptions,
  ): TaskRecord | undefined => {
    const next = transitionRecord(readRecord(steps, id), expected, patch, attempts);
    if (!next) return undefined;
    const finished = isFinished(next.status);
    q.updateTask.run({
      id,
      status: next.status,
      expires_at: next.expires_at ?? null,
      expires_ms: finished && ttlMs !== undefined ? now() + ttlMs : null,
      record: JSON.stringify(next),
    });
    if (finished && next.webhook) q.putOutbox.run(id, now());
    return next;
  };
}

/**
 * `delete`'s body: the row (its status and expiry indexes go with it), its
 * owner's count and its outbox entry (one transaction). A row past its
 * expiry the sweep has not taken yet goes too, its record resolved: the
 * sweep will not hand its image keys on any more.
 */
function deleteStep({ q }: Steps) {
  return (id: string): TaskRecord | undefined => {
    const row = q.taskById.get(id) as { seq: number; owner: string; record: string } | undefined;
    if (!row) return undefined;
    q.deleteTask.run(row.seq);
    q.addOwnerTasks.run(row.owner, -1);
    q.dropEmptyOwner.run(row.owner);
    q.clearOutbox.run(id);
    return JSON.parse(row.record) as TaskRecord;
  };
}

/** `getOrSetMeta`'s body: the first value set wins (one transaction). */
function metaStep(q: TaskStatements) {
  return (key: string, createValue: () => string): string => {
    const existing = q.getMeta.get(key) as string | undefined;
    if (existing) return existing;
    const value = createValue();
    q.putMeta.run(key, value);
    return value;
  };
}

/** A page of an owner's tasks, newest (or oldest) first, from the owner's index in one query. */
function listOwned(
  q: TaskStatements,
  owner: string,
  { limit, after, status, nowSec, order }: OwnedQuery,
  nowMs: number,
): OwnedPage | undefined {
  let from: number | undefined;
  if (after !== undefined) {
    from = q.ownedSeq.get(after, owner) as number | undefined;
    if (from === undefined) return undefined;
  }
  const params = { owner, nowSec, nowMs, limit: limit + 1, ...(status ? { status } : {}) };
  let rows: TaskRow[];
  if (order === "asc") {
    const asc = status === undefined ? q.ownedAsc : q.ownedByStatusAsc;
    rows = asc.all({ ...params, after: from ?? 0 }) as TaskRow[];
  } else {
    const desc = status === undefined ? q.owned : q.ownedByStatus;
    rows = desc.all({ ...params, before: from ?? Number.MAX_SAFE_INTEGER }) as TaskRow[];
  }
  const records = rows.slice(0, limit).map((row) => JSON.parse(row.record) as TaskRecord);
  return { records, hasMore: rows.length > limit };
}

/**
 * Deletes what has expired, in batches of {@link SWEEP_BATCH}, each one
 * transaction (tasks with their owners' counts; idempotency keys; Keyv
 * entries), yielding to the event loop between batches; the
 * image store keys of the deleted records go to `dropImages` after each.
 */
async function sweep(
  db: Database,
  q: TaskStatements,
  nowMs: number,
  dropImages?: (keys: string[]) => Promise<void>,
): Promise<number> {
  const batch = db.transaction(() => {
    const expired = q.expiredTasks.all(nowMs, SWEEP_BATCH) as Array<{
      seq: number;
      owner: string;
      record: string;
    }>;
    const perOwner = new Map<string, number>();
    const images: string[] = [];
    for (const { seq, owner, record } of expired) {
      q.deleteTask.run(seq);
      perOwner.set(owner, (perOwner.get(owner) ?? 0) + 1);
      if (dropImages) images.push(...imageKeysOf(JSON.parse(record) as TaskRecord));
    }
    for (const [owner, count] of perOwner) {
      q.addOwnerTasks.run(owner, -count);
      q.dropEmptyOwner.run(owner);
    }
    const keys = q.deleteExpiredIdempotency.run(nowMs, SWEEP_BATCH).changes;
    const values = q.deleteExpiredValues.run(nowMs, SWEEP_BATCH).changes;
    return {
      deleted: expired.length + keys + values,
      more: expired.length === SWEEP_BATCH,
      images,
    };
  });
  let deleted = 0;
  for (;;) {
    const { deleted: count, more, images } = batch.immediate();
    deleted += count;
    if (images.length > 0) await dropImages?.(images);
    if (!more && count < SWEEP_BATCH) return deleted;
    await new Promise((resolve) => setImmediate(resolve));
  }
}
