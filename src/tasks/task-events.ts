import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { watchRedisClient, type RedisClient } from "../redis/open-redis-client.js";
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

/**
 * A bus reaching every process of the deployment: in one process, a set of
 * listeners; across replicas, Redis pub/sub. A process hears its own events
 * at once, before they leave, also while Redis is away. Delivery to other
 * processes is best effort (a message sent while Redis is away goes out once
 * it is back, and a process cut off is told to `resync`); what must hold is
 * in the store, the bus only makes it known sooner.
 */
export interface TaskEvents {
  publish(event: TaskEvent): Promise<void>;
  /** Calls `listener` for every event, this process's own included; returns the unsubscribe. */
  subscribe(listener: TaskEventListener): () => void;
  close(): Promise<void>;
}

/**
 * A record as the bus carries it: without the upstream body (a prompt may be
 * 32,000 characters, and showing a task never needs it) and the sealed key.
 */
export function busRecord(record: TaskRecord): TaskRecord {
  const { sealedCredential: _sealed, request: _request, ...rest } = record;
  return { ...rest, request: {} };
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
    async close() {
      listeners.clear();
    },
  };
}

/** Messages kept while Redis is away, at most; the oldest go first. */
const MAX_UNSENT = 10_000;

/**
 * The bus of a deployment on Redis: one channel, `<prefix>::events`, on a
 * subscriber connection of its own (node-redis resubscribes after a
 * reconnect, before it says `ready`). Each message names the process that
 * sent it, which hears it locally instead.
 */
export async function createRedisTaskEvents(options: {
  client: RedisClient;
  prefix: string;
  logger: Logger;
}): Promise<TaskEvents> {
  const { client, logger } = options;
  const channel = `${options.prefix}::events`;
  const origin = randomBytes(9).toString("base64url");
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
  await subscriber.connect();
  await subscriber.subscribe(channel, (message) => {
    let parsed: { origin?: unknown; event?: TaskEvent };
    try {
      parsed = JSON.parse(message) as typeof parsed;
    } catch {
      logger.warn("ignoring a malformed task event");
      return;
    }
    if (parsed.origin !== origin && parsed.event) listeners.deliver(parsed.event, false);
  });

  // Messages not sent yet, in order: each publish sends them all, and so does Redis's return.
  const unsent: string[] = [];
  let flushing: Promise<boolean> | undefined;
  const sendUnsent = async () => {
    try {
      while (unsent.length > 0) {
        await client.publish(channel, unsent[0] as string);
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
    async publish(event) {
      listeners.deliver(event, true);
      if (event.type === "resync") return;
      const message = JSON.stringify({ origin, event });
      if (unsent.length >= MAX_UNSENT) unsent.shift();
      unsent.push(message);
      while (unsent.includes(message)) {
        if (!(await flush())) {
          throw new Error("Redis cannot be reached: the event goes out once it is back");
        }
      }
    },
    subscribe: listeners.add,
    async close() {
      client.off("ready", onReady);
      listeners.clear();
      await subscriber.close().catch(() => subscriber.destroy());
    },
  };
}
