import { EventEmitter } from "node:events";
import type { Logger } from "pino";
import { watchRedisClient, type RedisClient } from "../redis/open-redis-client.js";
import type { TaskStatus } from "./task-record.js";

/** What one process tells all the others about a task. */
export type TaskEvent =
  /** Abort the task's run wherever it runs (its record already says `failed`). */
  | { type: "cancel"; taskId: string }
  /** The task reached `completed` or `failed` (for waiting requests, webhooks). */
  | { type: "finished"; taskId: string; status: TaskStatus };

/**
 * A bus reaching every process of the deployment: an EventEmitter in one
 * process, Redis pub/sub across replicas. Delivery is best effort (a message
 * sent while Redis is away is lost); what must hold is in the store, the bus
 * only makes it happen sooner.
 */
export interface TaskEvents {
  publish(event: TaskEvent): Promise<void>;
  /** Calls `listener` for every event, this process's own included; returns the unsubscribe. */
  subscribe(listener: (event: TaskEvent) => void): () => void;
  close(): Promise<void>;
}

/** The bus of one process. */
export function createLocalTaskEvents(): TaskEvents {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  return {
    async publish(event) {
      emitter.emit("event", event);
    },
    subscribe(listener) {
      emitter.on("event", listener);
      return () => emitter.off("event", listener);
    },
    async close() {
      emitter.removeAllListeners();
    },
  };
}

/**
 * The bus of a deployment on Redis: one channel, `<prefix>::events`, on a
 * subscriber connection of its own (node-redis resubscribes after a reconnect).
 */
export async function createRedisTaskEvents(options: {
  client: RedisClient;
  prefix: string;
  logger: Logger;
}): Promise<TaskEvents> {
  const channel = `${options.prefix}::events`;
  const local = createLocalTaskEvents();
  const subscriber = options.client.duplicate();
  watchRedisClient(subscriber, options.logger, "events");
  await subscriber.connect();
  await subscriber.subscribe(channel, (message) => {
    try {
      void local.publish(JSON.parse(message) as TaskEvent);
    } catch {
      options.logger.warn("ignoring a malformed task event");
    }
  });
  return {
    async publish(event) {
      await options.client.publish(channel, JSON.stringify(event));
    },
    subscribe: local.subscribe,
    async close() {
      await local.close();
      await subscriber.close().catch(() => subscriber.destroy());
    },
  };
}
