import type { Listening, TaskEvent, TaskEvents } from "../core/task-events.js";

/** What a follower of one task hears. */
export type FeedSignal =
  /** The task reached a stage (any replica's event). */
  | Extract<TaskEvent, { type: "stage" }>
  /** Events may have been lost (the bus was cut off): read the task again. */
  | { type: "resync" }
  /** The service is stopping: answer now with what is known. */
  | { type: "released" };

/** One follower's hold on a task's feed. */
export interface Following {
  /**
   * Resolves once the task's events from every process reach this follower:
   * read the task after it, never before. Rejects when the bus cannot be
   * reached.
   */
  ready: Promise<void>;
  /** Stops following (always call it, once or more). */
  unfollow(): void;
}

/** One subscription to the bus for the whole process, fanned out by task id. */
export interface TaskFeed {
  /**
   * Calls `listener` with every signal about `taskId` from now on. After
   * {@link release}, a new follower is told `released` at once
   * (synchronously).
   */
  follow(taskId: string, listener: (signal: FeedSignal) => void): Following;
  /** Followers now, over all tasks. */
  readonly size: number;
  /** Tells every follower, and every later one, that the service is stopping. */
  release(): void;
  close(): void;
}

/** A task's followers in this process, and the process's interest in its events on the bus. */
interface Followed {
  listeners: Set<(signal: FeedSignal) => void>;
  listening: Listening;
}

/**
 * The per-process fan-out of task events: one bus subscription, and a map
 * from task id to its followers, so that an event costs one lookup however
 * many requests follow other tasks, and a follower costs a set entry (no
 * timer, no read of the store). The first follower of a task makes the
 * process listen to it on the bus (on Redis, one SUBSCRIBE on the shared
 * subscriber connection), the last one to leave ends that.
 */
export function createTaskFeed(events: TaskEvents): TaskFeed {
  const followed = new Map<string, Followed>();
  let size = 0;
  let released = false;
  const each = (signal: FeedSignal, listeners: Iterable<(signal: FeedSignal) => void>) => {
    for (const listener of [...listeners]) listener(signal);
  };
  const unsubscribe = events.subscribe((event) => {
    if (event.type === "stage") {
      const task = followed.get(event.record.id);
      if (task) each(event, task.listeners);
    } else if (event.type === "resync") {
      for (const task of [...followed.values()]) each(event, task.listeners);
    }
  });

  return {
    follow(taskId, listener) {
      let task = followed.get(taskId);
      if (!task) {
        task = { listeners: new Set(), listening: events.listen(taskId) };
        // Whoever waits on `ready` hears a failure; nobody else needs to.
        task.listening.ready.catch(() => undefined);
        followed.set(taskId, task);
      }
      const own = task;
      // A wrapper of its own: the same function may follow twice and unfollow once.
      const entry = (signal: FeedSignal) => listener(signal);
      own.listeners.add(entry);
      size += 1;
      let following = true;
      if (released) listener({ type: "released" });
      return {
        ready: own.listening.ready,
        unfollow() {
          if (!following) return;
          following = false;
          size -= 1;
          own.listeners.delete(entry);
          if (own.listeners.size === 0 && followed.get(taskId) === own) {
            followed.delete(taskId);
            own.listening.stop();
          }
        },
      };
    },
    get size() {
      return size;
    },
    release() {
      released = true;
      for (const task of [...followed.values()]) each({ type: "released" }, task.listeners);
    },
    close() {
      this.release();
      unsubscribe();
    },
  };
}
