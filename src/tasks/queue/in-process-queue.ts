import {
  HANDOVER,
  type Admission,
  type AdmissionLimits,
  type LeaseEnd,
  type QueueEntry,
  type TaskHandler,
  type TaskQueue,
} from "../core/task-queue.js";
import { runWideController } from "./run-wide-controller.js";

/** Options of {@link createInProcessQueue}. */
export interface InProcessQueueOptions {
  maxConcurrent: number;
  /**
   * Whether a task this process stops running is picked up again (a
   * persistent store: the next process adopts it). Otherwise its lease ends
   * with `shutdown` and the task fails.
   */
  handsBack: boolean;
}

/**
 * The queue of the embedded stores (memory, SQLite), which belong to one
 * process: admission counts, the waiting line and the running tasks live in
 * this process, so every step is atomic, and a running task's lease is the
 * process itself.
 */
export function createInProcessQueue(options: InProcessQueueOptions): TaskQueue {
  const s: QueueState = {
    options,
    waiting: [],
    reserved: new Map(),
    running: new Map(),
    runs: new Set(),
    handler: undefined,
    stopped: false,
    draining: runWideController(),
  };
  return {
    admit: async (entry, limits) => admit(s, entry, limits),
    async release(entry) {
      s.reserved.delete(entry.taskId);
    },
    enqueue: async (entry) => enqueue(s, entry),
    adopt: async (entries) => adopt(s, entries),
    remove: async (entry) => remove(s, entry),
    async cancel(taskId) {
      s.running.get(taskId)?.abort("cancelled" satisfies LeaseEnd);
    },
    async counts() {
      return { waiting: s.waiting.length, running: s.running.size };
    },
    async start(taskHandler) {
      s.handler = taskHandler;
      s.stopped = false;
      if (s.draining.signal.aborted) s.draining = runWideController();
      pump(s);
    },
    stop: (graceMs) => stop(s, graceMs),
  };
}

/** The queue's state, all in this process. */
interface QueueState {
  options: InProcessQueueOptions;
  waiting: QueueEntry[];
  /** Places admitted and not yet enqueued or released: task id -> owner. */
  reserved: Map<string, string>;
  running: Map<string, AbortController>;
  runs: Set<Promise<void>>;
  handler: TaskHandler | undefined;
  stopped: boolean;
  /** Aborted when a stop begins, if tasks are handed back (see `TaskLease.draining`). */
  draining: AbortController;
}

/** Starts waiting tasks while slots are free. */
function pump(s: QueueState): void {
  const { waiting, running, runs } = s;
  while (s.handler && !s.stopped && running.size < s.options.maxConcurrent && waiting.length > 0) {
    const entry = waiting.shift() as QueueEntry;
    const { taskId } = entry;
    const controller = new AbortController();
    running.set(taskId, controller);
    const handler = s.handler;
    const run: Promise<void> = handler({
      taskId,
      signal: controller.signal,
      draining: s.draining.signal,
    })
      .then((ended) => {
        // Handed over while this queue still runs: back in line here. While it stops, the
        // task stays queued in the store for the next process.
        if (ended === HANDOVER && !s.stopped) waiting.push(entry);
      })
      // A run that failed left its task unfinished in the store: the next adopt() picks it up.
      .catch(() => undefined)
      .finally(() => {
        running.delete(taskId);
        runs.delete(run);
        pump(s);
      });
    runs.add(run);
  }
}

function isKnown({ running, waiting }: QueueState, taskId: string): boolean {
  return running.has(taskId) || waiting.some((entry) => entry.taskId === taskId);
}

function admit(
  { options, running, waiting, reserved }: QueueState,
  entry: QueueEntry,
  limits: AdmissionLimits,
): Admission {
  const freeSlots = Math.max(0, options.maxConcurrent - running.size);
  if (waiting.length + reserved.size >= limits.maxQueued + freeSlots) {
    return { admitted: false, reason: "queue_full" };
  }
  let owned = 0;
  for (const other of waiting) if (other.owner === entry.owner) owned++;
  for (const owner of reserved.values()) if (owner === entry.owner) owned++;
  if (owned >= limits.maxQueuedPerOwner + freeSlots) {
    return { admitted: false, reason: "owner_queue_full" };
  }
  reserved.set(entry.taskId, entry.owner);
  return { admitted: true };
}

function enqueue(s: QueueState, entry: QueueEntry): void {
  s.reserved.delete(entry.taskId);
  if (isKnown(s, entry.taskId)) return;
  s.waiting.push({ taskId: entry.taskId, owner: entry.owner });
  pump(s);
}

function adopt(s: QueueState, entries: readonly QueueEntry[]): void {
  for (const entry of entries) {
    if (!isKnown(s, entry.taskId) && !s.reserved.has(entry.taskId)) {
      s.waiting.push({ taskId: entry.taskId, owner: entry.owner });
    }
  }
  pump(s);
}

function remove({ waiting }: QueueState, entry: QueueEntry): boolean {
  const index = waiting.findIndex((other) => other.taskId === entry.taskId);
  if (index === -1) return false;
  waiting.splice(index, 1);
  return true;
}

/** Runs get `graceMs` to end; then their leases end, and the queue waits for them. */
async function stop(s: QueueState, graceMs: number): Promise<void> {
  s.stopped = true;
  // A persistent store's next process takes over what is handed back now.
  if (s.options.handsBack) s.draining.abort();
  const drained = Promise.all([...s.runs]);
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([drained, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
  clearTimeout(timer);
  const end: LeaseEnd = s.options.handsBack ? "handback" : "shutdown";
  for (const controller of s.running.values()) controller.abort(end);
  await drained;
}
