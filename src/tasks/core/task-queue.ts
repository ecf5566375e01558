/** A task as the queue knows it: its id and whose it is (for per-key shares). */
export interface QueueEntry {
  taskId: string;
  owner: string;
}

/** How many tasks may wait, across the deployment and per owner. */
export interface AdmissionLimits {
  /** Tasks waiting for a slot across the deployment (beyond the slots free now). */
  maxQueued: number;
  /** Tasks of this entry's owner waiting for a slot. */
  maxQueuedPerOwner: number;
}

/** The answer of {@link TaskQueue.admit}. */
export type Admission =
  { admitted: true } | { admitted: false; reason: "queue_full" | "owner_queue_full" };

/**
 * Why a lease ended before its run did:
 * - `cancelled`: the task was cancelled (its record already says so);
 * - `handback`: this process stops, and the queue gives the task to another
 *   run (on another replica, or after a restart);
 * - `shutdown`: this process stops and nothing will run the task again;
 * - `lost`: the lease expired (the holder could not renew it), so another
 *   run may have the task already.
 */
export type LeaseEnd = "cancelled" | "handback" | "shutdown" | "lost";

/**
 * One run's hold on a task: while `signal` is not aborted, no other run has
 * the task. On the embedded stores the lease is the process itself; on Redis
 * it is the job's lock, renewed while the run lasts.
 */
export interface TaskLease {
  taskId: string;
  /** Aborted with a {@link LeaseEnd} as its reason. */
  signal: AbortSignal;
  /**
   * Aborted when this process begins to stop and another run can take the
   * task over (a persistent queue): a run that can give its task up at no
   * cost (the poll of a channel's job) hands it over now, and its handler
   * resolves {@link HANDOVER}; any other run goes on for the grace the stop
   * gives. Never aborted where nothing would take the task over (memory).
   */
  draining: AbortSignal;
  /**
   * Aborted with `handback` once this process stops and the grace its stop
   * gives has run out, like `signal` for a run that still holds its lease:
   * it also reaches a run whose lease lapsed (`signal` aborted with `lost`
   * already), which goes on paying for its generation until then. Absent
   * where no lease lapses (the embedded stores).
   */
  stopped?: AbortSignal;
}

/**
 * What a handler resolves when its run gave the task back by itself (its
 * record is `queued` again): the queue puts it back in line at once, for
 * another replica (or the next start) to take.
 */
export const HANDOVER = "handover";

/**
 * Runs one task under its lease; resolves {@link HANDOVER} when the run gave
 * the task back, and rejects only when the run must be tried again later.
 */
export type TaskHandler = (lease: TaskLease) => Promise<typeof HANDOVER | void>;

/** Tasks waiting and running, across the deployment (the queue gauges). */
export interface QueueCounts {
  waiting: number;
  running: number;
}

/**
 * Hands tasks to runs, at most `maxConcurrent` at once, in the order they
 * came. The limits live here, so a queue spanning replicas (BullMQ on Redis)
 * holds them across all of them. Every method may reject when the queue's
 * backend cannot be reached. One conformance suite runs against every backend.
 */
export interface TaskQueue {
  /**
   * Takes a place for a task about to be created, within `limits`; one
   * atomic step, also across replicas. The place becomes the task's with
   * {@link enqueue}, or is given back with {@link release}; a place neither
   * confirmed nor released (its process died) lapses on its own.
   */
  admit(entry: QueueEntry, limits: AdmissionLimits): Promise<Admission>;
  /** Gives back a place that did not become a task (an idempotent replay, a refusal). */
  release(entry: QueueEntry): Promise<void>;
  /** Makes a created task runnable. Idempotent per task id. */
  enqueue(entry: QueueEntry): Promise<void>;
  /**
   * Makes sure each unfinished task (from the store) is waiting or running
   * somewhere, enqueueing those that are neither: what a restart, or a lost
   * enqueue, left. A task whose run ended with its holder is the queue's to
   * detect (the embedded stores: any task not running here; Redis: an
   * expired job lock) and comes back to the handler as a new run.
   */
  adopt(entries: readonly QueueEntry[]): Promise<void>;
  /** Takes a task out before it started; false when it was not waiting. */
  remove(entry: QueueEntry): Promise<boolean>;
  /** Ends the lease of a running task with `cancelled`, wherever it runs. */
  cancel(taskId: string): Promise<void>;
  counts(): Promise<QueueCounts>;
  /** Starts handing tasks to `handler`. */
  start(handler: TaskHandler): Promise<void>;
  /**
   * Stops taking tasks and aborts the leases' `draining` signal (where another
   * run can take a task over); running ones get `graceMs` to finish, then
   * their leases end (`handback` where another run will pick the task up,
   * else `shutdown`); resolves when every handler returned.
   */
  stop(graceMs: number): Promise<void>;
}
