import type { TaskRecord } from "../core/task-record.js";
import type { FeedSignal, TaskFeed } from "../events/task-feed.js";

/** Why a wait ended. */
export type WaitEnd = "finished" | "timeout" | "aborted" | "released" | "resync";

/** One request's interest in a task's end, taken before it reads the task. */
export interface TaskWatch {
  /**
   * Resolves `finished` when the task finishes (heard on the bus, from any
   * replica), `timeout` after `ms`, `aborted` when `signal` aborts (the client
   * went away), `released` when the service stops, and `resync` when the bus
   * was cut off (the task's end may have been missed: read it again);
   * whichever comes first. A finish or release heard before the call
   * resolves at once.
   */
  until(ms: number, signal?: AbortSignal): Promise<WaitEnd>;
  /**
   * The task as the event that finished it carried (see `busRecord`: what
   * showing it needs), once `until` resolved `finished`.
   */
  readonly finished: TaskRecord | undefined;
  /** Resolves once the task's end would be heard: read the task after it (rejects: bus away). */
  ready: Promise<void>;
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
  /**
   * The service is stopping: wakes every waiting request (they answer with
   * the task as it is) and every later one at once, and every other follower
   * of the feed (event streams end).
   */
  release(): void;
  close(): void;
}

/** The longest timer Node takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const isEnd = (signal: FeedSignal): signal is Extract<FeedSignal, { type: "stage" }> =>
  signal.type === "stage" && (signal.stage === "completed" || signal.stage === "failed");

/**
 * Waiting requests on the process's task feed: an event costs a lookup and a
 * waiting request a timer, never a read of the store.
 */
export function createTaskWaiters(feed: TaskFeed): TaskWaiters {
  let size = 0;

  return {
    watch(taskId) {
      /** What ended the wait before `until` was called, if anything. */
      let heard: WaitEnd | undefined;
      let notify: ((why: WaitEnd) => void) | undefined;
      let finished: TaskRecord | undefined;
      const following = feed.follow(taskId, (signal) => {
        if (isEnd(signal)) finished ??= signal.record;
        const why: WaitEnd | undefined = isEnd(signal)
          ? "finished"
          : signal.type === "released" || signal.type === "resync"
            ? signal.type
            : undefined;
        if (!why) return;
        // A finish or a release holds for every later call; a resync only until it is heard.
        if (why !== "resync") heard = why;
        else if (!notify) heard ??= why;
        notify?.(why);
      });
      size += 1;
      let disposed = false;

      return {
        ready: following.ready,
        get finished() {
          return finished;
        },
        until(ms, signal) {
          if (heard) {
            const why = heard;
            if (why === "resync") heard = undefined;
            return Promise.resolve(why);
          }
          if (signal?.aborted) return Promise.resolve("aborted");
          return new Promise((resolve) => {
            const settle = (why: WaitEnd) => {
              clearTimeout(timer);
              signal?.removeEventListener("abort", onAbort);
              notify = undefined;
              resolve(why);
            };
            const timer = setTimeout(() => settle("timeout"), Math.min(ms, MAX_TIMER_MS));
            const onAbort = () => settle("aborted");
            notify = settle;
            signal?.addEventListener("abort", onAbort, { once: true });
          });
        },
        dispose() {
          if (disposed) return;
          disposed = true;
          size -= 1;
          following.unfollow();
        },
      };
    },
    get size() {
      return size;
    },
    release: () => feed.release(),
    close() {
      feed.release();
    },
  };
}
