import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { watchRedisClient, type RedisClient } from "../../redis/open-redis-client.js";
import type { TaskRecord } from "../task-record.js";

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
function createListeners(logger: Logger | undefined) {
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

/** Messages kept while Redis is away, at most; the oldest go first. */
const MAX_UNSENT = 10_000;

/**
 * The bus of a deployment on Redis, on a subscriber connection of its own
 * (node-redis resubscribes after a reconnect, before it says `ready`):
 * `<prefix>::events` carries every `cancel`, `<prefix>::task:<id>` the stages
 * of one task, subscribed to while this process listens to it. A message
 * starts with the id of the process that sent it (which heard it already)
 * and a newline, so that a process skips its own without parsing them.
 */
export async function createRedisTaskEvents(options: {
  client: RedisClient;
  prefix: string;
  logger: Logger;
}): Promise<TaskEvents> {
  const { client, logger } = options;
  const cancels = `${options.prefix}::events`;
  const taskChannel = (taskId: string) => `${options.prefix}::task:${taskId}`;
  const origin = `${randomBytes(9).toString("base64url")}\n`;
  const listeners = createListeners(logger);
  const subscriber = client.duplicate();
  watchRedisClient(subscriber, logger, "events");
  let cutOff = false;
  subscriber.on("reconnecting", () => (cutOff = true));
  subscriber.on("ready", () => {
    if (!cutOff) return;
    cutOff = false;
    listeners.deliver({ type: "resync" }, true);
  });
  const onMessage = (message: string) => {
    if (message.startsWith(origin)) return;
    let event: TaskEvent;
    try {
      event = JSON.parse(message.slice(message.indexOf("\n") + 1)) as TaskEvent;
    } catch {
      logger.warn("ignoring a malformed task event");
      return;
    }
    listeners.deliver(event, false);
  };
  await subscriber.connect();
  await subscriber.subscribe(cancels, onMessage);

  /** Tasks listened to, by how many times. */
  const listened = new Map<string, { count: number; ready: Promise<void> }>();
  const outbox = createOutbox(client, logger);

  return {
    async publish(event) {
      listeners.deliver(event, true);
      if (event.type === "resync") return;
      // A task just made is known to its submitter alone, who reads it after this: no other
      // process can be listening to it yet.
      if (event.type === "stage" && event.stage === "queued") return;
      const channel = event.type === "cancel" ? cancels : taskChannel(event.record.id);
      await outbox.send(channel, origin + JSON.stringify(event));
    },
    subscribe: listeners.add,
    listen(taskId) {
      const channel = taskChannel(taskId);
      let entry = listened.get(taskId);
      if (!entry) {
        const subscribed = subscriber.subscribe(channel, onMessage);
        entry = { count: 0, ready: subscribed };
        listened.set(taskId, entry);
        // A failed subscription is tried again by the next listener.
        subscribed.catch(() => {
          if (listened.get(taskId) === entry) listened.delete(taskId);
        });
      }
      entry.count += 1;
      const own = entry;
      let stopped = false;
      return {
        ready: own.ready,
        stop() {
          if (stopped) return;
          stopped = true;
          own.count -= 1;
          if (own.count > 0 || listened.get(taskId) !== own) return;
          listened.delete(taskId);
          subscriber.unsubscribe(channel, onMessage).catch(() => undefined);
        },
      };
    },
    async close() {
      outbox.close();
      listeners.clear();
      await subscriber.close().catch(() => subscriber.destroy());
    },
  };
}

/**
 * Publishes in order; what Redis did not take (it is away) is kept, at most
 * {@link MAX_UNSENT} messages, and sent first by the next publish or as soon
 * as the client is back.
 */
function createOutbox(client: RedisClient, logger: Logger) {
  const unsent: Array<{ channel: string; message: string }> = [];
  let flushing: Promise<boolean> | undefined;
  const sendUnsent = async () => {
    try {
      while (unsent.length > 0) {
        const next = unsent[0]!;
        await client.publish(next.channel, next.message);
        unsent.shift();
      }
      return true;
    } catch {
      return false;
    }
  };
  /** One pass at a time; resolves whether everything went out. */
  const flush = (): Promise<boolean> =>
    (flushing ??= sendUnsent().finally(() => (flushing = undefined)));
  const onReady = () => void flush();
  client.on("ready", onReady);
  return {
    async send(channel: string, message: string) {
      if (unsent.length >= MAX_UNSENT) {
        unsent.shift();
        logger.warn("Redis has been away long: the oldest unsent task event is dropped");
      }
      const entry = { channel, message };
      unsent.push(entry);
      while (unsent.includes(entry)) {
        if (!(await flush())) {
          throw new Error("Redis cannot be reached: the event goes out once it is back");
        }
      }
    },
    close: () => client.off("ready", onReady),
  };
}
