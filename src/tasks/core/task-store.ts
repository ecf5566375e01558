import type { ListOrder } from "../../contract/task-contract.js";
import type { TaskRecord, TaskStatus } from "./task-record.js";

/** An idempotency key, scoped to the owner, and a fingerprint of the body. */
export interface Idempotency {
  key: string;
  fingerprint: string;
}

/** What an idempotency key already made: the same request again, or another one. */
export type IdempotentAnswer =
  /** The key was seen with the same body: the earlier task, as it is now. */
  | { kind: "replayed"; record: TaskRecord }
  /** The key was seen with another body. */
  | { kind: "conflict" };

/** The result of {@link TaskStore.create}. */
export type CreateResult =
  | { kind: "created"; record: TaskRecord }
  | IdempotentAnswer
  /** The owner already holds `maxPerOwner` tasks: nothing was written. */
  | { kind: "owner_full" };

/** Options of {@link TaskStore.create}. */
export interface CreateOptions {
  idempotency?: Idempotency;
  /**
   * Tasks one owner may hold at once, unfinished and finished-not-expired
   * together; checked in the same atomic step as the write. No limit when unset.
   */
  maxPerOwner?: number;
}

/** Options of {@link TaskStore.transition}. */
export interface TransitionOptions {
  /** A finished task is kept this long more (and then deleted). */
  ttlMs?: number;
  /**
   * Only when the record's `attempts` is this: the run that holds the task's
   * lease. A run whose lease passed to another one can no longer write.
   */
  attempts?: number;
}

/** A page of {@link TaskStore.listOwned}. */
export interface OwnedQuery {
  /** Tasks in the page, at most. */
  limit: number;
  /** The page starts after this task, in the list's order. */
  after?: string;
  /** Only tasks in this status. */
  status?: TaskStatus;
  /** By creation: `desc` (newest first, the default) or `asc` (oldest first). */
  order?: ListOrder;
  /** Unix seconds now: finished tasks that expired by then are left out. */
  nowSec: number;
}

/** The answer of {@link TaskStore.listOwned}. */
export interface OwnedPage {
  /** In the query's order (newest first unless `asc`). */
  records: TaskRecord[];
  /** Whether more tasks follow the page. */
  hasMore: boolean;
}

/** A finished task whose webhook event still has to reach the delivery queue. */
export interface OutboxEntry {
  id: string;
  /** Milliseconds since the epoch when the task entered the outbox (finished). */
  sinceMs: number;
}

/**
 * Where tasks live (their images live in the image store). Small on purpose: every backend
 * (memory, SQLite, Redis) passes one conformance suite. Admission (how many
 * tasks may wait) is the queue's business; the store only keeps each owner
 * within its share of the store. What only some backends offer beside it (the
 * webhook journal, key-value entries) is the backend's (`tasks/backends/`).
 */
export interface TaskStore {
  get(id: string): Promise<TaskRecord | undefined>;
  /** The task an owner's idempotency key already made, if it still exists. */
  findIdempotent(owner: string, idempotency: Idempotency): Promise<IdempotentAnswer | undefined>;
  /**
   * Writes a new queued task, or answers with the task an idempotency key
   * already made; one atomic step, also across processes sharing the store.
   */
  create(record: TaskRecord, options?: CreateOptions): Promise<CreateResult>;
  /**
   * Moves a task from `expected` to `patch.status` (a legal transition),
   * merging `patch`: a compare-and-set. Resolves `undefined`, writing nothing,
   * when the task is gone, no longer in `expected` or (with `options.attempts`)
   * run by another lease: the race was lost and the caller backs off.
   *
   * In the same atomic step, a task that finishes enters the webhook outbox
   * (when it has a `webhook`).
   */
  transition(
    id: string,
    expected: TaskStatus,
    patch: Partial<TaskRecord> & { status: TaskStatus },
    options?: TransitionOptions,
  ): Promise<TaskRecord | undefined>;
  /**
   * Deletes a task in one atomic step: its record and every entry it has in
   * the indexes (its owner's list and share of the store, the unfinished
   * list, the webhook outbox, the expiry bookkeeping, so the sweep hands none
   * of its image keys on later). An idempotency key that made it stays and
   * then reads as unknown. Resolves the record as it was (its image keys are
   * the caller's to delete), or `undefined` when there was none.
   */
  delete(id: string): Promise<TaskRecord | undefined>;
  /** Tasks not finished (queued or in progress), oldest first: what must have a place in the queue. */
  listUnfinished(): Promise<TaskRecord[]>;
  /**
   * A page of an owner's tasks, newest first (oldest first with `order: "asc"`),
   * from the owner's index (ordered by creation): costs the page, not a walk
   * over the owner's tasks or all tasks. `undefined` when `after` is not one of
   * the owner's tasks.
   */
  listOwned(owner: string, query: OwnedQuery): Promise<OwnedPage | undefined>;
  /**
   * Finished tasks whose webhook event has not been handed to the delivery
   * queue yet, at most `limit`, those that finished first first.
   */
  webhookOutbox(limit: number): Promise<OutboxEntry[]>;
  /** Takes a task out of the webhook outbox (its delivery is queued). */
  clearWebhookOutbox(id: string): Promise<void>;
  /** A value set once for all processes sharing the store (the URL signing secret). */
  getOrSetMeta(key: string, create: () => string): Promise<string>;
  /**
   * Deletes what has expired (finished tasks, their images, idempotency keys,
   * their entries in the indexes); resolves the number of tasks and keys
   * deleted. Called periodically, by every process; cheap when there is
   * nothing to do. `dropImages` gets the image store keys the deleted records
   * held (results, an edit's inputs), so their objects go with them; it must
   * not reject (what it misses, the image store's day sweep deletes).
   */
  sweepExpired(dropImages?: (keys: string[]) => Promise<void>): Promise<number>;
  /** Throws when the store cannot be reached (for `/readyz`). */
  ping(): Promise<void>;
  /** Whether tasks outlive the process, i.e. a restart should pick them up. */
  readonly persistent: boolean;
  close(): Promise<void>;
}
