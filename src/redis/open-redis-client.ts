import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { Logger } from "pino";
import type { RedisTopology } from "../config/schema/redis-topology.js";
import { redactUrl } from "../logging/redact-url.js";
import { isCluster, watchCommandDeadlines } from "./command-deadlines.js";
import type { RedisClient } from "./redis-client.js";
import { watchRedisPrimary, type RedisPrimaryWatch } from "./redis-primary.js";

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

/** Retries back off to 2 s between attempts. */
const backoff = (attempt: number) => Math.min(100 * 2 ** attempt, 2_000);

/** What every connection shares, whatever the deployment. */
function connectionOptions(): RedisOptions {
  return {
    lazyConnect: true,
    connectTimeout: 5_000,
    // While Redis is away (down, or mid-failover) commands fail at once: a request answers 503
    // `store_unavailable` rather than wait. Worker connections wait instead (see bullmq-worker).
    enableOfflineQueue: false,
    maxRetriesPerRequest: null,
    // A command that was on a lost connection may have run: it fails, and is never sent again.
    autoResendUnfulfilledCommands: false,
    retryStrategy: backoff,
    // A master demoted under a live connection answers writes READONLY: find the new one.
    reconnectOnError: (err) => (err.message.startsWith("READONLY") ? 2 : false),
  };
}

/** An ioredis client for `topology`, not connected yet. */
export function createRedisClient(topology: RedisTopology, sentinelPassword?: string): RedisClient {
  const common = connectionOptions();
  switch (topology.mode) {
    case "standalone":
      return new Redis(topology.url, { ...common, ...(topology.tls ? { tls: {} } : {}) });
    case "sentinel":
      return new Redis({
        ...common,
        sentinels: topology.sentinels,
        name: topology.masterName,
        db: topology.db,
        username: topology.username,
        password: topology.password,
        sentinelPassword,
        sentinelRetryStrategy: backoff,
        // Not ioredis's failoverDetector: its reconnect on the sentinels' +switch-master message
        // could hang, right after the client had found the new master. A demoted master that
        // stays up answers writes READONLY, which reconnects (reconnectOnError).
        ...(topology.tls ? { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
      });
    case "cluster": {
      const clusterOptions: ClusterOptions = {
        lazyConnect: true,
        enableOfflineQueue: false,
        clusterRetryStrategy: backoff,
        // Managed clusters (ElastiCache, Memorystore) answer with names their certificates hold.
        dnsLookup: (address, callback) => callback(null, address),
        redisOptions: {
          ...common,
          username: topology.username,
          password: topology.password,
          ...(topology.tls ? { tls: {} } : {}),
        },
      };
      return new Cluster(topology.nodes, clusterOptions);
    }
  }
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
  if (isCluster(client)) client.on("node error", lost);
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
