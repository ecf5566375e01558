import type { Logger } from "pino";
import type { TaskRecord } from "./task-record.js";

/** The moments of a task's life its watchers are told of, in the order they happen. */
export type TaskStage = "queued" | "in_progress" | "partial_image" | "completed" | "failed";

/** What one process tells all the others about a task. */
export type TaskEvent =
  /** Abort the task's run wherever it runs (its record already says `failed`). */
  | { type: "cancel"; taskId: string }
  /**
   * The task reached `stage`; `record` is the task as that step wrote it
   * (see {@link busRecord}), so a replica can show it without reading the
   * store. `partialIndex` names a `partial_image`'s image.
   */
  | { type: "stage"; stage: TaskStage; record: TaskRecord; partialIndex?: number }
  /**
   * This process's own, never sent: the bus was cut off and is back, and what
   * other processes sent meanwhile is lost. Whoever follows a task reads it
   * again once.
   */
  | { type: "resync" };

/** Hears every event; `local` when this process sent it. */
export type TaskEventListener = (event: TaskEvent, local: boolean) => void;

/** A process's interest in one task's events from other processes. */
export interface Listening {
  /** Resolves once events sent from now on reach this process; rejects when the bus cannot be reached. */
  ready: Promise<void>;
  /** Ends the interest (call it once). */
  stop(): void;
}

/**
 * A bus reaching every process of the deployment: in one process, a set of
 * listeners; across replicas, Redis pub/sub. A process hears its own events
 * at once, before they leave, also while Redis is away. From other processes
 * it hears every `cancel`, and the stages of the tasks it {@link listen}s to
 * (Redis delivers a task's stages only to the processes that asked, so an
 * event nobody follows costs one PUBLISH). Delivery to other processes is
 * best effort (a message sent while Redis is away goes out once it is back,
 * and a process cut off is told to `resync`); what must hold is in the
 * store, the bus only makes it known sooner.
 */
export interface TaskEvents {
  publish(event: TaskEvent): Promise<void>;
  /** Calls `listener` for every event this process hears; returns the unsubscribe. */
  subscribe(listener: TaskEventListener): () => void;
  /** Asks to hear `taskId`'s stages from other processes too, until `stop`. */
  listen(taskId: string): Listening;
  close(): Promise<void>;
}

/** The fields of the upstream body a task's view shows (`presentTask`): the prompt and parameters. */
const SHOWN_REQUEST_FIELDS = [
  "prompt",
  "size",
  "quality",
  "n",
  "background",
  "output_format",
  "output_compression",
  "moderation",
  "input_fidelity",
];

/**
 * A record as the bus carries it: of the upstream body only what showing the
 * task needs (not `user`), and without the sealed key.
 */
export function busRecord(record: TaskRecord): TaskRecord {
  const { sealedCredential: _sealed, request, ...rest } = record;
  const shown = SHOWN_REQUEST_FIELDS.filter((name) => Object.hasOwn(request, name));
  return { ...rest, request: Object.fromEntries(shown.map((name) => [name, request[name]])) };
}

/** Listeners called one by one: one that throws stops neither the others nor the publisher. */
export function createListeners(logger: Logger | undefined) {
  const listeners = new Set<TaskEventListener>();
  return {
    add(listener: TaskEventListener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    deliver(event: TaskEvent, local: boolean) {
      for (const listener of listeners) {
        try {
          listener(event, local);
        } catch (err) {
          logger?.error({ err, event: event.type }, "a task event listener failed");
        }
      }
    },
    clear: () => listeners.clear(),
  };
}

/** The bus of one process. */
export function createLocalTaskEvents(logger?: Logger): TaskEvents {
  const listeners = createListeners(logger);
  return {
    async publish(event) {
      listeners.deliver(event, true);
    },
    subscribe: listeners.add,
    // One process: it hears every event already.
    listen: () => ({ ready: Promise.resolve(), stop: () => undefined }),
    async close() {
      listeners.clear();
    },
  };
}
