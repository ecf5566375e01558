import Keyv from "keyv";
import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import { isCluster } from "../redis/command-deadlines.js";
import { redisKeyPrefix } from "../redis/key-prefix.js";
import { closeRedisClient } from "../redis/open-redis-client.js";
import { openStoreRedis } from "./open-store-redis.js";
import type { RedisPrimaryWatch } from "../redis/redis-primary.js";
import { RedisKeyvStore } from "../redis/redis-keyv-store.js";
import { createBullmqWebhookQueue } from "../webhooks/bullmq-webhook-queue.js";
import { createInProcessWebhookQueue } from "../webhooks/in-process-webhook-queue.js";
import type { WebhookQueue } from "../webhooks/webhook-queue.js";
import { createBullmqQueue } from "./queue/bullmq-queue.js";
import { createInProcessQueue } from "./queue/in-process-queue.js";
import type { TaskQueue } from "./core/task-queue.js";
import { createTaskStore } from "./store/create-task-store.js";
import type { LegacyTaskData } from "./legacy/legacy-task-data.js";
import { createRedisLegacyData } from "./legacy/redis-legacy-data.js";
import { createSqliteLegacyData } from "./legacy/sqlite-legacy-data.js";
import { LEGACY_SQLITE_MIGRATIONS } from "./legacy/sqlite-migrations.js";
import { useKeyvCodec } from "./store/keyv-codec.js";
import type { TaskStore } from "./core/task-store.js";
import { createLocalTaskEvents, type TaskEvents } from "./core/task-events.js";
import { createRedisTaskEvents } from "./events/redis-task-events.js";

/** Where tasks live and how they reach a run: one store, its queue, its bus. */
export interface TaskBackend {
  store: TaskStore;
  queue: TaskQueue;
  events: TaskEvents;
  /**
   * Small entries with a TTL that every replica must see alike (which channel
   * created a stored response, say), under their own namespace. On Redis they
   * live in Redis with native expiry; on SQLite in the store's key-value
   * table, swept with the tasks; on the memory store in this process's
   * memory, at most `maxLocalEntries` (the oldest go first).
   */
  keyValue(namespace: string, maxLocalEntries: number): Keyv;
  /** Webhook deliveries, apart from the task queue. */
  webhooks: WebhookQueue;
  /**
   * What earlier releases left in the store, for the upgrade step at start-up
   * (`upgradeLegacyData`); undefined on the memory store, which holds none.
   */
  legacy: LegacyTaskData | undefined;
  /**
   * On Redis: which node is the primary and when this process last saw a
   * switch (for `/readyz` and the metrics); undefined on the embedded stores.
   */
  redis?: RedisPrimaryWatch;
  /** Closes the bus and the store (the queues are stopped by their owner first). */
  close(): Promise<void>;
}

/**
 * The store, queues and bus `store.url` calls for. The embedded stores belong
 * to one process: in-process queues (webhook deliveries kept in the store's
 * journal) and an EventEmitter. Redis (one server, a Sentinel set or a
 * Cluster) serves any number of replicas: the Redis store, BullMQ and
 * pub/sub, all on one client (plus the connections BullMQ's workers and
 * pub/sub block on, its duplicates), so every one follows a failover.
 */
export async function openTaskBackend(config: Config, logger: Logger): Promise<TaskBackend> {
  const deployment = config.deployment.taskStore;
  if (deployment.kind !== "redis") {
    const { store, sqlite } = await createTaskStore(config, logger, {
      sqliteMigrations: LEGACY_SQLITE_MIGRATIONS,
    });
    const events = createLocalTaskEvents(logger);
    return {
      store,
      events,
      queue: createInProcessQueue({
        maxConcurrent: config.imageTasks.maxConcurrent,
        handsBack: store.persistent,
      }),
      keyValue: (namespace, maxLocalEntries) => localKeyValue(store, namespace, maxLocalEntries),
      webhooks: createInProcessWebhookQueue({
        journal: store.webhookJournal!,
        logger: logger.child({ component: "webhooks" }),
      }),
      legacy: sqlite && createSqliteLegacyData(sqlite, Date.now),
      async close() {
        await events.close();
        await store.close();
      },
    };
  }
  const { client, primary } = await openStoreRedis(config, deployment, logger);
  const prefix = redisKeyPrefix(config.store.prefix, deployment.topology);
  try {
    const { store } = await createTaskStore(config, logger, { client });
    const events = await createRedisTaskEvents({ client, prefix, logger });
    const queue = createBullmqQueue({
      client,
      prefix,
      maxConcurrent: config.imageTasks.maxConcurrent,
      leaseMs: config.imageTasks.leaseSec * 1000,
      events,
      logger,
    });
    const webhooks = createBullmqWebhookQueue({
      client,
      prefix,
      config: config.webhooks,
      leaseMs: config.imageTasks.leaseSec * 1000,
      logger: logger.child({ component: "webhooks" }),
    });
    return {
      store,
      events,
      queue,
      keyValue(namespace) {
        const keyv = new Keyv({
          store: new RedisKeyvStore(client),
          namespace: `${prefix}-${namespace}`,
          throwOnErrors: true,
        });
        keyv.on("error", () => undefined); // thrown to the caller as well
        return keyv;
      },
      webhooks,
      // A cluster is new to this release: no earlier one left anything there.
      legacy: isCluster(client)
        ? undefined
        : createRedisLegacyData({ client, prefix, now: Date.now }),
      redis: primary,
      async close() {
        await events.close();
        await store.close();
        await closeRedisClient(client);
      },
    };
  } catch (err) {
    client.disconnect();
    throw err;
  }
}

/** Entries in the store's own table when it has one (SQLite), else in a bounded map. */
function localKeyValue(store: TaskStore, namespace: string, maxLocalEntries: number): Keyv {
  if (!store.keyValueStore) return new Keyv({ store: new BoundedMap(maxLocalEntries), namespace });
  const keyv = new Keyv({ store: store.keyValueStore, namespace, throwOnErrors: true });
  keyv.on("error", () => undefined); // thrown to the caller as well
  // Keyv's format at native JSON's cost.
  useKeyvCodec(keyv);
  return keyv;
}

/**
 * A Map that forgets its oldest entries past `maxEntries`: Keyv drops an
 * expired entry only when it is read, so a process-memory Keyv under steady
 * traffic must be bounded some other way.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly maxEntries: number) {
    super();
  }

  override set(key: K, value: V): this {
    if (!this.has(key) && this.size >= this.maxEntries) {
      const oldest = this.keys().next();
      if (!oldest.done) this.delete(oldest.value);
    }
    return super.set(key, value);
  }
}
