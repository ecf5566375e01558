import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { watchRedisClient, type RedisClient } from "../../redis/open-redis-client.js";
import type { RedisEventChannels } from "../../redis/redis-keys.js";
import { onNodeLost } from "../../redis/redis-topologies.js";
import { createListeners, type TaskEvent, type TaskEvents } from "../core/task-events.js";

/** How long a cluster takes to subscribe again on another node, about. */
const RESUBSCRIBE_MS = 1_000;

/** Messages kept while Redis is away, at most; the oldest go first. */
const MAX_UNSENT = 10_000;

/**
 * The bus of a deployment on Redis, on a subscriber connection of its own
 * (ioredis resubscribes after a reconnect, to the master of the moment or,
 * on a cluster, to another node when its node is lost; messages sent
 * meanwhile are missed, so listeners are told to `resync`): one channel
 * carries every `cancel`, and one per task its stages, subscribed to while
 * this process listens to it (see `redis/redis-keys.ts`). A message
 * starts with the id of the process that sent it (which heard it already)
 * and a newline, so that a process skips its own without parsing them.
 */
export async function createRedisTaskEvents(options: {
  client: RedisClient;
  /**
   * Where messages are published: default `client`. The backend's
   * auto-pipelined store client, so that a tick's messages go in one write.
   */
  publisher?: RedisClient;
  channels: RedisEventChannels;
  logger: Logger;
}): Promise<TaskEvents> {
  const { client, logger } = options;
  const { cancels, task: taskChannel } = options.channels;
  const origin = `${randomBytes(9).toString("base64url")}\n`;
  const listeners = createListeners(logger);
  const subscriber = await openSubscriber(client, logger, origin, listeners);
  await subscriber.subscribe(cancels);

  /** Tasks listened to, by how many times. */
  const listened = new Map<string, { count: number; ready: Promise<void> }>();
  const outbox = createOutbox(options.publisher ?? client, logger);

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
        const subscribed = subscriber.subscribe(channel).then(() => undefined);
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
          subscriber.unsubscribe(channel).catch(() => undefined);
        },
      };
    },
    async close() {
      outbox.close();
      listeners.clear();
      await subscriber.quit().catch(() => subscriber.disconnect());
    },
  };
}

/**
 * The bus's subscriber connection, connected: every message but this
 * process's own (`origin`) goes to the listeners, and after a reconnect or a
 * lost cluster node they are told to `resync` (what was sent meanwhile is
 * missed).
 */
async function openSubscriber(
  client: RedisClient,
  logger: Logger,
  origin: string,
  listeners: ReturnType<typeof createListeners>,
): Promise<RedisClient> {
  const subscriber = client.duplicate();
  watchRedisClient(subscriber, logger, "events");
  let cutOff = false;
  const resync = () => {
    if (!cutOff) return;
    cutOff = false;
    listeners.deliver({ type: "resync" }, true);
  };
  subscriber.on("reconnecting", () => (cutOff = true));
  subscriber.on("ready", resync);
  // A lost node may have been the one subscribed to: the cluster subscribes on another one
  // at once, and what was sent meanwhile is read again by the listeners a moment later.
  onNodeLost(subscriber, () => {
    cutOff = true;
    setTimeout(resync, RESUBSCRIBE_MS).unref();
  });
  subscriber.on("message", (_channel: string, message: string) => {
    if (message.startsWith(origin)) return;
    let event: TaskEvent;
    try {
      event = JSON.parse(message.slice(message.indexOf("\n") + 1)) as TaskEvent;
    } catch {
      logger.warn("ignoring a malformed task event");
      return;
    }
    listeners.deliver(event, false);
  });
  await subscriber.connect();
  return subscriber;
}

/**
 * Publishes in order; what Redis did not take (it is away) is kept, at most
 * {@link MAX_UNSENT} messages, and sent first by the next publish or as soon
 * as the client is back. Every message waiting when a pass starts is sent
 * at once (one connection keeps them in order), not one round trip each.
 */
function createOutbox(client: RedisClient, logger: Logger) {
  const unsent: Array<{ channel: string; message: string }> = [];
  let flushing: Promise<boolean> | undefined;
  const sendUnsent = async () => {
    while (unsent.length > 0) {
      const batch = unsent.slice();
      const sent = await Promise.allSettled(
        batch.map((next) => client.publish(next.channel, next.message)),
      );
      const went = new Set(batch.filter((_, index) => sent[index]!.status === "fulfilled"));
      // Only what went out leaves: the rest, and what came meanwhile, stay in order.
      const kept = unsent.filter((entry) => !went.has(entry));
      unsent.splice(0, unsent.length, ...kept);
      if (went.size < batch.length) return false;
    }
    return true;
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
