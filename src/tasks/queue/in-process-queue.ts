import type { LeaseEnd, QueueEntry, TaskHandler, TaskQueue } from "./task-queue.js";

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
  const waiting: QueueEntry[] = [];
  /** Places admitted and not yet enqueued or released: task id -> owner. */
  const reserved = new Map<string, string>();
  const running = new Map<string, AbortController>();
  const runs = new Set<Promise<void>>();
  let handler: TaskHandler | undefined;
  let stopped = false;

  const pump = () => {
    while (handler && !stopped && running.size < options.maxConcurrent && waiting.length > 0) {
      const { taskId } = waiting.shift() as QueueEntry;
      const controller = new AbortController();
      running.set(taskId, controller);
      const run: Promise<void> = handler({ taskId, signal: controller.signal })
        // A run that failed left its task unfinished in the store: the next adopt() picks it up.
        .catch(() => undefined)
        .finally(() => {
          running.delete(taskId);
          runs.delete(run);
          pump();
        });
      runs.add(run);
    }
  };
  const isKnown = (taskId: string) =>
    running.has(taskId) || waiting.some((entry) => entry.taskId === taskId);

  return {
    async admit(entry, limits) {
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
    },

    async release(entry) {
      reserved.delete(entry.taskId);
    },

    async enqueue(entry) {
      reserved.delete(entry.taskId);
      if (isKnown(entry.taskId)) return;
      waiting.push({ taskId: entry.taskId, owner: entry.owner });
      pump();
    },

    async adopt(entries) {
      for (const entry of entries) {
        if (!isKnown(entry.taskId) && !reserved.has(entry.taskId)) {
          waiting.push({ taskId: entry.taskId, owner: entry.owner });
        }
      }
      pump();
    },

    async remove(entry) {
      const index = waiting.findIndex((other) => other.taskId === entry.taskId);
      if (index === -1) return false;
      waiting.splice(index, 1);
      return true;
    },

    async cancel(taskId) {
      running.get(taskId)?.abort("cancelled" satisfies LeaseEnd);
    },

    async counts() {
      return { waiting: waiting.length, running: running.size };
    },

    async start(taskHandler) {
      handler = taskHandler;
      stopped = false;
      pump();
    },

    async stop(graceMs) {
      stopped = true;
      const drained = Promise.all([...runs]);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        drained,
        new Promise((resolve) => (timer = setTimeout(resolve, graceMs))),
      ]);
      clearTimeout(timer);
      const end: LeaseEnd = options.handsBack ? "handback" : "shutdown";
      for (const controller of running.values()) controller.abort(end);
      await drained;
    },
  };
}
