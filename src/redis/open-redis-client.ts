import type { Logger } from "pino";
import type { RedisTopology } from "../config/schema/redis-topology.js";
import { redactUrl } from "../logging/redact-url.js";
import { watchCommandDeadlines } from "./command-deadlines.js";
import type { RedisClient } from "./redis-client.js";
import { watchRedisPrimary, type RedisPrimaryWatch } from "./redis-primary.js";
import { createRedisClient } from "./redis-topologies.js";

/** The one Redis client library of the service (ioredis), shared by store, queues and events. */
export type { RedisClient } from "./redis-client.js";

/** Options of {@link openRedisClient}. */
export interface OpenRedisOptions {
  /** `store.url` as written: named (password masked) in the start-up error. */
  url: string;
  /** What `store.url` names: one server, a Sentinel set or a Cluster. */
  topology: RedisTopology;
  /** `store.sentinelPassword`. */
  sentinelPassword?: string | undefined;
  logger: Logger;
  /** How long start-up waits for Redis before giving up (`store.connectTimeoutSec`). Default 10 s. */
  connectTimeoutMs?: number;
  /** Deadline of every command (`store.commandTimeoutSec`). Default 5 s. */
  commandTimeoutMs?: number;
}

/** An open client, and which node is its primary. */
export interface OpenedRedis {
  client: RedisClient;
  primary: RedisPrimaryWatch;
}

/**
 * Connects to the Redis deployment `store.url` names, or rejects after
 * `connectTimeoutMs` with a message naming the URL (without its password).
 * Once connected the client reconnects for ever: to the master the sentinels
 * name at that moment, or to the nodes that serve each slot of a cluster.
 * Commands fail at once while it is away (503 `store_unavailable` on task
 * routes), and each has a deadline ({@link watchCommandDeadlines}): a Redis
 * that accepts and never answers is cut and reconnected, not waited on.
 */
export async function openRedisClient(options: OpenRedisOptions): Promise<OpenedRedis> {
  const { logger } = options;
  const deadline = Date.now() + (options.connectTimeoutMs ?? 10_000);
  const timeoutMs = options.commandTimeoutMs ?? 5_000;
  const client = createRedisClient(options.topology, options.sentinelPassword);
  watchRedisClient(client, logger, "redis");
  watchCommandDeadlines(client, { timeoutMs, logger, name: "redis" });
  const primary = watchRedisPrimary(client, options.topology, logger);
  try {
    await readyBy(client, deadline);
  } catch (err) {
    client.disconnect();
    throw new Error(
      `store.url: cannot reach Redis at ${redactUrl(options.url)} (${(err as Error).message})`,
      { cause: err },
    );
  }
  return { client, primary };
}

/** Connects `client`; rejects with the last connection error once `deadline` passed. */
async function readyBy(client: RedisClient, deadline: number): Promise<void> {
  let lastError: Error | undefined;
  const onError = (err: Error) => (lastError = err);
  client.on("error", onError);
  client.on("node error", onError);
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      new Promise<void>((resolve) => {
        client.once("ready", () => resolve());
        client.connect().catch((err: Error) => (lastError ??= err));
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(lastError ?? new Error("no answer")),
          Math.max(0, deadline - Date.now()),
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
    client.off("error", onError);
    client.off("node error", onError);
  }
}

/**
 * Logs a client's trouble once per outage (ioredis reports every failed
 * reconnect as an `error` event, and an unheard one would crash the process).
 */
export function watchRedisClient(client: RedisClient, logger: Logger, name: string): void {
  let down = false;
  const lost = (err: Error) => {
    if (down) return;
    down = true;
    logger.warn({ err: err.message, client: name }, "Redis connection lost; retrying");
  };
  client.on("error", lost);
  // A Cluster's nodes report theirs apart (one server or a Sentinel set never emit this).
  client.on("node error", lost);
  client.on("reconnecting", () => logger.debug({ client: name }, "Redis reconnecting"));
  client.on("end", () => logger.debug({ client: name }, "Redis connection closed"));
  client.on("ready", () => {
    if (!down) return;
    down = false;
    logger.info({ client: name }, "Redis connection back");
  });
}

/** How long a closing client's QUIT may wait (a Redis away, a failover under way). */
const QUIT_WAIT_MS = 1000;

/** Closes a client: QUIT when it answers in time, else at once. */
export async function closeRedisClient(client: RedisClient): Promise<void> {
  if (client.status === "end") return;
  // Not connected (Redis down, or between failover attempts): nothing would carry the QUIT.
  if (client.status !== "ready") {
    client.disconnect();
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), QUIT_WAIT_MS);
  });
  try {
    if ((await Promise.race([client.quit(), late])) === "late") client.disconnect();
  } catch {
    client.disconnect();
  } finally {
    clearTimeout(timer);
  }
}
