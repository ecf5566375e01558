import { createClient } from "@keyv/redis";
import type { RedisClient } from "./redis-client.js";
import type { Logger } from "pino";
import { redactUrl } from "../logging/redact-url.js";
import { ConnectionCutter, watchCommandDeadlines } from "./command-deadlines.js";

/** The one Redis client library of the service (node-redis), shared by store, queue and events. */
export type { RedisClient } from "./redis-client.js";

/** Options of {@link openRedisClient}. */
export interface OpenRedisOptions {
  url: string;
  logger: Logger;
  /** How long start-up waits for Redis before giving up (`store.connectTimeoutSec`). Default 10 s. */
  connectTimeoutMs?: number;
  /** Deadline of every command (`store.commandTimeoutSec`). Default 5 s. */
  commandTimeoutMs?: number;
}

/**
 * Connects to Redis, or rejects after `connectTimeoutMs` with a message
 * naming the URL (without its password). Once connected the client
 * reconnects for ever. Commands fail at once while Redis is away instead of
 * waiting in an offline queue, so a request answers 503 `store_unavailable`
 * rather than hang; the worker and the subscriber retry on their own. Every
 * command, on this client and its duplicates, has a deadline
 * ({@link watchCommandDeadlines}): a Redis that accepts and never answers is
 * cut and reconnected, not waited on.
 */
export async function openRedisClient(options: OpenRedisOptions): Promise<RedisClient> {
  const { logger } = options;
  const deadline = Date.now() + (options.connectTimeoutMs ?? 10_000);
  let connected = false;
  const commandTimeoutMs = options.commandTimeoutMs ?? 5_000;
  const cutter = new ConnectionCutter();
  const client = createClient({
    url: options.url,
    disableOfflineQueue: true,
    // Idle connections (the subscriber, a quiet worker) are probed, so a hang is found there too.
    pingInterval: commandTimeoutMs,
    socket: {
      signal: cutter.asSignal(),
      connectTimeout: 5_000,
      // Back off to 2 s between attempts; at start-up, give up at the deadline.
      reconnectStrategy: (retries, cause) =>
        !connected && Date.now() > deadline ? cause : Math.min(100 * 2 ** retries, 2_000),
    },
  }) as RedisClient;
  watchRedisClient(client, logger, "redis");
  watchCommandDeadlines(client, { cutter, timeoutMs: commandTimeoutMs, logger, name: "redis" });
  try {
    await client.connect();
  } catch (err) {
    // A connect that gave up has closed the client already, and destroying it again throws
    // ("The client is closed"), which would hide the reason below.
    if (client.isOpen) client.destroy();
    throw new Error(
      `store.url: cannot reach Redis at ${redactUrl(options.url)} (${(err as Error).message})`,
      { cause: err },
    );
  }
  connected = true;
  return client;
}

/**
 * Logs a client's trouble once per outage (node-redis reports every failed
 * reconnect as an `error` event, and an unheard one would crash the process).
 */
export function watchRedisClient(client: RedisClient, logger: Logger, name: string): void {
  let down = false;
  client.on("error", (err: Error) => {
    if (down) return;
    down = true;
    logger.warn({ err: err.message, client: name }, "Redis connection lost; retrying");
  });
  client.on("reconnecting", () => logger.debug({ client: name }, "Redis reconnecting"));
  client.on("end", () => logger.debug({ client: name }, "Redis connection closed"));
  client.on("ready", () => {
    if (!down) return;
    down = false;
    logger.info({ client: name }, "Redis connection back");
  });
}
