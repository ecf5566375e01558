import type { TaskEvent, TaskEvents } from "../task-events.js";

/** What a follower of one task hears. */
export type FeedSignal =
  /** The task reached a stage (any replica's event). */
  | Extract<TaskEvent, { type: "stage" }>
  /** Events may have been lost (the bus was cut off): read the task again. */
  | { type: "resync" }
  /** The service is stopping: answer now with what is known. */
  | { type: "released" };

/** One subscription to the bus for the whole process, fanned out by task id. */
export interface TaskFeed {
  /**
   * Calls `listener` with every signal about `taskId` from now on; returns
   * the unfollow (always call it). After {@link release}, a new follower is
   * told `released` at once (synchronously).
   */
  follow(taskId: string, listener: (signal: FeedSignal) => void): () => void;
  /** Followers now, over all tasks. */
  readonly size: number;
  /** Tells every follower, and every later one, that the service is stopping. */
  release(): void;
  close(): void;
}

/**
 * The per-process fan-out of task events: one bus subscription and a map
 * from task id to its followers, so that an event costs one lookup however
 * many requests follow other tasks, and a follower costs a set entry (no
 * timer, no read of the store).
 */
export function createTaskFeed(events: TaskEvents): TaskFeed {
  const followers = new Map<string, Set<(signal: FeedSignal) => void>>();
  let size = 0;
  let released = false;
  const each = (signal: FeedSignal, listeners: Iterable<(signal: FeedSignal) => void>) => {
    for (const listener of [...listeners]) listener(signal);
  };
  const unsubscribe = events.subscribe((event) => {
    if (event.type === "stage") {
      const listeners = followers.get(event.record.id);
      if (listeners) each(event, listeners);
    } else if (event.type === "resync") {
      for (const listeners of [...followers.values()]) each(event, listeners);
    }
  });

  return {
    follow(taskId, listener) {
      let listeners = followers.get(taskId);
      if (!listeners) {
        listeners = new Set();
        followers.set(taskId, listeners);
      }
      const own = listeners;
      // A wrapper of its own: the same function may follow twice and unfollow once.
      const entry = (signal: FeedSignal) => listener(signal);
      own.add(entry);
      size += 1;
      let followed = true;
      if (released) listener({ type: "released" });
      return () => {
        if (!followed) return;
        followed = false;
        size -= 1;
        own.delete(entry);
        if (own.size === 0 && followers.get(taskId) === own) followers.delete(taskId);
      };
    },
    get size() {
      return size;
    },
    release() {
      released = true;
      for (const listeners of [...followers.values()]) each({ type: "released" }, listeners);
    },
    close() {
      this.release();
      unsubscribe();
    },
  };
}
