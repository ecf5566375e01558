import type { TaskRecord, TaskStatus } from "./task-record.js";

/** The result of {@link TaskStore.create}. */
export type CreateResult =
  | { kind: "created"; record: TaskRecord }
  /** The idempotency key was seen with the same body: the earlier task. */
  | { kind: "replayed"; record: TaskRecord }
  /** The idempotency key was seen with another body. */
  | { kind: "conflict" }
  /** A new task, but `admit` said no (the queue is full): nothing was written. */
  | { kind: "refused" };

/** An idempotency key, scoped to the owner, and a fingerprint of the body. */
export interface Idempotency {
  key: string;
  fingerprint: string;
}

/**
 * Where tasks and their image bytes live. Small on purpose: every backend
 * (memory, SQLite, Redis) passes one conformance suite.
 */
export interface TaskStore {
  get(id: string): Promise<TaskRecord | undefined>;
  /**
   * Writes a new queued task, or answers with the task an idempotency key already made.
   * `admit`, asked only when a new task would be written and one call at a time, may
   * refuse it: a replay is answered even when the queue is full.
   */
  create(
    record: TaskRecord,
    idempotency?: Idempotency,
    admit?: () => boolean,
  ): Promise<CreateResult>;
  /**
   * Moves a task from `expected` to `patch.status` (a legal transition),
   * merging `patch`. Resolves `undefined`, writing nothing, when the task is
   * gone or no longer in `expected`: the race was lost and the caller backs off.
   * A finished task is kept `ttlMs` more.
   */
  transition(
    id: string,
    expected: TaskStatus,
    patch: Partial<TaskRecord> & { status: TaskStatus },
    ttlMs?: number,
  ): Promise<TaskRecord | undefined>;
  /** Tasks not finished (queued or in progress), oldest first: what a restart must pick up. */
  listUnfinished(): Promise<TaskRecord[]>;
  putImage(id: string, index: number, bytes: Buffer, ttlMs: number): Promise<void>;
  getImage(id: string, index: number): Promise<Buffer | undefined>;
  deleteImages(id: string, count: number): Promise<void>;
  /** A value set once for all processes sharing the store (the URL signing secret). */
  getOrSetMeta(key: string, create: () => string): Promise<string>;
  /**
   * Deletes what has expired (finished tasks, their images, idempotency keys)
   * for backends that only forget an expired key when it is read; resolves the
   * number of keys deleted. Called periodically; cheap when there is nothing to do.
   */
  sweepExpired(): Promise<number>;
  /** Throws when the store cannot be reached (for `/readyz`). */
  ping(): Promise<void>;
  /** Whether tasks outlive the process, i.e. a restart should pick them up. */
  readonly persistent: boolean;
  close(): Promise<void>;
}
