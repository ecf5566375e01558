import Keyv from "keyv";
import type { Logger } from "pino";
import type { Config } from "../../config/config-schema.js";
import type { RedisTopology } from "../../config/schema/redis-topology.js";
import {
  closeRedisClient,
  watchRedisClient,
  openRedisClient,
  type OpenedRedis,
  type RedisClient,
} from "../../redis/open-redis-client.js";
import { redisKeys, type RedisKeys } from "../../redis/redis-keys.js";
import { RedisKeyvStore } from "../../redis/redis-keyv-store.js";
import type { RedisPrimaryWatch } from "../../redis/redis-primary.js";
import { duplicatePipelined, earlierReleasesClient } from "../../redis/redis-topologies.js";
import { createBullmqWebhookQueue } from "../../webhooks/bullmq-webhook-queue.js";
import { createRedisResponseEventLog } from "../events/redis-response-event-log.js";
import { createRedisTaskEvents } from "../events/redis-task-events.js";
import { createRedisLegacyData } from "../legacy/redis-legacy-data.js";
import { createBullmqQueue } from "../queue/bullmq-queue.js";
import { createRedisTaskStore } from "../store/redis-task-store.js";
import {
  idempotencyTtlMs,
  MAX_EVENTS_PER_RESPONSE,
  responseEventsIdleTtlMs,
  type TaskBackend,
  type TaskBackendKind,
} from "./task-backend.js";
import type { KeyValue } from "../../collections/key-value.js";
import { keyvKeyValue } from "./keyv-key-value.js";

/** What `store.url` says of a Redis deployment (`config.deployment.taskStore`). */
export interface RedisTarget {
  url: string;
  topology: RedisTopology;
}

/**
 * `redis://`, `redis+sentinel://`, `redis+cluster://`: a store any number of
 * replicas share. One client (and the connections BullMQ's workers and
 * pub/sub block on, its duplicates), so every part follows a failover: the
 * Redis store (Keyv's entry format, Lua compare-and-set), BullMQ's task and
 * webhook queues, the bus on pub/sub, key-value entries with native expiry,
 * the primary watch. Every key is named once (`redis/redis-keys.ts`), from
 * `store.prefix` and the topology. A forward secret must be configured: Redis
 * keeps the keys it seals.
 */
export function redisBackend(config: Config, target: RedisTarget): TaskBackendKind {
  return {
    open: (logger) => openRedisBackend(config, target, logger),
    probe: (logger) => probeRedis(config, target, logger),
  };
}

/** The client of the store, with the store's connect and command deadlines. */
function openStoreClient(
  config: Config,
  target: RedisTarget,
  logger: Logger,
): Promise<OpenedRedis> {
  return openRedisClient({
    url: target.url,
    topology: target.topology,
    sentinelPassword: config.store.sentinelPassword,
    logger,
    connectTimeoutMs: config.store.connectTimeoutSec * 1000,
    commandTimeoutMs: config.store.commandTimeoutSec * 1000,
  });
}

async function openRedisBackend(
  config: Config,
  target: RedisTarget,
  logger: Logger,
): Promise<TaskBackend> {
  const { client, primary } = await openStoreClient(config, target, logger);
  try {
    return await buildParts(config, redisKeys(config.store.prefix, target.topology), {
      client,
      primary,
      logger,
    });
  } catch (err) {
    client.disconnect();
    throw err;
  }
}

/** What every part is built on. */
interface Connection {
  client: RedisClient;
  primary: RedisPrimaryWatch;
  logger: Logger;
}

async function buildParts(config: Config, keys: RedisKeys, c: Connection): Promise<TaskBackend> {
  const { client, logger } = c;
  const leaseMs = config.imageTasks.leaseSec * 1000;
  // The task store on a connection of its own, its commands batched per tick (see duplicatePipelined).
  const storeClient = duplicatePipelined(client);
  watchRedisClient(storeClient, logger, "store");
  await storeClient.connect().catch(() => undefined);
  const store = createRedisTaskStore({
    client: storeClient,
    keys: keys.store,
    idempotencyTtlMs: idempotencyTtlMs(config),
    replicas: replicaConfirmation(config),
  });
  const events = await createRedisTaskEvents({
    client,
    publisher: storeClient,
    channels: keys.events,
    logger,
  });
  const earlier = earlierReleasesClient(client);
  return {
    store,
    events,
    queue: createBullmqQueue({
      client,
      queueKeys: keys.taskQueue,
      admission: keys.admission,
      ledgerClient: storeClient,
      maxConcurrent: config.imageTasks.maxConcurrent,
      leaseMs,
      events,
      logger,
    }),
    webhooks: createBullmqWebhookQueue({
      client,
      queueKeys: keys.webhookQueue,
      config: config.webhooks,
      leaseMs,
      logger: logger.child({ component: "webhooks" }),
    }),
    responseEvents: createRedisResponseEventLog({
      client: storeClient,
      keys: keys.responseEvents,
      maxEventsPerResponse: MAX_EVENTS_PER_RESPONSE,
      idleTtlMs: responseEventsIdleTtlMs(config),
    }),
    keyValue: (namespace) => redisKeyValue(storeClient, keys, namespace),
    legacy:
      earlier &&
      createRedisLegacyData({
        client: earlier,
        storeKeys: keys.store,
        legacyKeys: keys.legacy,
        now: Date.now,
      }),
    forwardSecret: undefined,
    redis: c.primary,
    async close() {
      await events.close();
      await store.close();
      await closeRedisClient(storeClient);
      await closeRedisClient(client);
    },
  };
}

/** `store.minReplicas` and the wait for them, when set. */
function replicaConfirmation(config: Config) {
  const { minReplicas, commandTimeoutSec } = config.store;
  if (minReplicas <= 0) return undefined;
  return {
    minReplicas,
    // WAIT's own deadline, within the command's (which counts the round trip too).
    waitMs: Math.max(100, Math.floor(commandTimeoutSec * 1000 * 0.8)),
    keepCancelledMs: config.imageTasks.retentionSec * 1000,
  };
}

/** Keyv on Redis itself, entries with a native TTL; errors reach the caller. */
function redisKeyValue(client: RedisClient, keys: RedisKeys, namespace: string): KeyValue {
  const place = keys.keyValue(namespace);
  const keyv = new Keyv({
    store: new RedisKeyvStore(client, place.key),
    namespace: place.namespace,
    throwOnErrors: true,
  });
  keyv.on("error", () => undefined); // thrown to the caller as well
  return keyvKeyValue(keyv);
}

/** Redis answers `PING` (within `store.connectTimeoutSec`), on a client closed after. */
async function probeRedis(config: Config, target: RedisTarget, logger: Logger): Promise<string> {
  const { client, primary } = await openStoreClient(config, target, logger);
  try {
    await client.ping();
    const { mode, primary: nodes } = primary.status();
    return `Redis (${mode}) answers PING; primary ${nodes.join(", ")}`;
  } finally {
    await closeRedisClient(client);
  }
}
