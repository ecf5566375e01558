import type { TaskEvents } from "./task-events.js";

/** One request's interest in a task's end, taken before it reads the task. */
export interface TaskWatch {
  /**
   * Resolves `finished` when the task finishes (heard on the bus, from any
   * replica), `timeout` after `ms`, `aborted` when `signal` aborts (the client
   * went away) and `released` when the service stops; whichever comes first.
   */
  until(ms: number, signal?: AbortSignal): Promise<"finished" | "timeout" | "aborted" | "released">;
  /** Forgets the watch (always call it, in `finally`). */
  dispose(): void;
}

/** Requests waiting for tasks to finish, in this process. */
export interface TaskWaiters {
  /**
   * Starts listening for `taskId`'s end. Taken before the caller reads the
   * task, so a finish between the read and the wait is not missed.
   */
  watch(taskId: string): TaskWatch;
  /** Waiting requests in this process. */
  readonly size: number;
  /** Wakes every waiting request (they answer with the task as it is) and every later one at once. */
  release(): void;
  close(): void;
}

/** The longest timer Node takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Waiting requests, woken by the bus's `finished` events: one subscription
 * for the process, and a map from task id to its waiters, so an event costs
 * a lookup and a waiting request costs a timer, never a read of the store.
 */
export function createTaskWaiters(events: TaskEvents): TaskWaiters {
  const waiting = new Map<string, Set<() => void>>();
  let released = false;
  let size = 0;
  const unsubscribe = events.subscribe((event) => {
    if (event.type !== "finished") return;
    for (const wake of waiting.get(event.taskId) ?? []) wake();
  });
  const releaseAll = new Set<() => void>();

  return {
    watch(taskId) {
      let finished = false;
      let notify: (() => void) | undefined;
      const wake = () => {
        finished = true;
        notify?.();
      };
      const listeners = waiting.get(taskId) ?? new Set();
      listeners.add(wake);
      waiting.set(taskId, listeners);
      size += 1;
      let disposed = false;

      return {
        until(ms, signal) {
          if (finished) return Promise.resolve("finished");
          if (released) return Promise.resolve("released");
          if (signal?.aborted) return Promise.resolve("aborted");
          return new Promise((resolve) => {
            const settle = (why: "finished" | "timeout" | "aborted" | "released") => {
              clearTimeout(timer);
              signal?.removeEventListener("abort", onAbort);
              releaseAll.delete(onRelease);
              notify = undefined;
              resolve(why);
            };
            const timer = setTimeout(() => settle("timeout"), Math.min(ms, MAX_TIMER_MS));
            const onAbort = () => settle("aborted");
            const onRelease = () => settle("released");
            notify = () => settle("finished");
            signal?.addEventListener("abort", onAbort, { once: true });
            releaseAll.add(onRelease);
          });
        },
        dispose() {
          if (disposed) return;
          disposed = true;
          size -= 1;
          listeners.delete(wake);
          if (listeners.size === 0 && waiting.get(taskId) === listeners) waiting.delete(taskId);
        },
      };
    },
    get size() {
      return size;
    },
    release() {
      released = true;
      for (const wake of [...releaseAll]) wake();
    },
    close() {
      this.release();
      unsubscribe();
    },
  };
}
