import type { Database } from "better-sqlite3";
import Keyv from "keyv";
import type { Logger } from "pino";
import type { Config } from "../../config/config-schema.js";
import { redisKeyPrefix } from "../../redis/key-prefix.js";
import { openRedisClient, type RedisClient } from "../../redis/open-redis-client.js";
import type { TaskStore } from "../core/task-store.js";
import { createKeyvTaskStore } from "./keyv-task-store.js";
import { openSqliteTaskStore, type SqliteMigration } from "./open-sqlite-task-store.js";
import { createRedisTaskStore } from "./redis-task-store.js";

/** Options of {@link createTaskStore}. */
export interface CreateTaskStoreOptions {
  /** Redis: the client to share (else the store opens one of its own). */
  client?: RedisClient;
  /** SQLite: steps for files earlier releases wrote (see `tasks/legacy/`). */
  sqliteMigrations?: readonly SqliteMigration[];
}

/** An open task store, and SQLite's connection for the steps that read what earlier releases left. */
export interface OpenedTaskStore {
  store: TaskStore;
  sqlite?: Database;
}

/**
 * Opens the store the deployment names: memory, a SQLite file (its folder is
 * created; locked to this process) or Redis (on `client` when given, else on
 * a client of its own).
 */
export async function createTaskStore(
  config: Config,
  logger: Logger,
  options: CreateTaskStoreOptions = {},
): Promise<OpenedTaskStore> {
  const opened = await openTaskStore(config, logger, options);
  // The first sweep of a new store marks where expiry buckets start.
  await opened.store.sweepExpired();
  return opened;
}

async function openTaskStore(
  config: Config,
  logger: Logger,
  options: CreateTaskStoreOptions,
): Promise<OpenedTaskStore> {
  const deployment = config.deployment.taskStore;
  // Idempotency keys must outlive the task they point at by the whole run.
  const idempotencyTtlMs = (config.imageTasks.retentionSec + config.imageTasks.timeoutSec) * 1000;
  switch (deployment.kind) {
    case "memory": {
      const keyv = new Keyv({ namespace: "its" });
      // Kept as they are, never serialized: the Map is this process's memory, so a
      // record costs its object, not JSON text.
      keyv.serialize = undefined;
      keyv.deserialize = undefined;
      return {
        store: createKeyvTaskStore(watch(keyv, logger), { persistent: false, idempotencyTtlMs }),
      };
    }
    case "sqlite": {
      const { store, db } = await openSqliteTaskStore(deployment.file, {
        idempotencyTtlMs,
        logger: logger.child({ component: "store" }),
        migrations: options.sqliteMigrations ?? [],
      });
      return { store, sqlite: db };
    }
    case "redis": {
      const { client } = options;
      const { minReplicas, commandTimeoutSec } = config.store;
      const store = createRedisTaskStore({
        client:
          client ??
          (
            await openRedisClient({
              url: deployment.url,
              topology: deployment.topology,
              sentinelPassword: config.store.sentinelPassword,
              logger: logger.child({ component: "store" }),
              connectTimeoutMs: config.store.connectTimeoutSec * 1000,
              commandTimeoutMs: commandTimeoutSec * 1000,
            })
          ).client,
        prefix: redisKeyPrefix(config.store.prefix, deployment.topology),
        idempotencyTtlMs,
        ownsClient: client === undefined,
        replicas:
          minReplicas > 0
            ? {
                minReplicas,
                // WAIT's own deadline, within the command's (which counts the round trip too).
                waitMs: Math.max(100, Math.floor(commandTimeoutSec * 1000 * 0.8)),
                keepCancelledMs: config.imageTasks.retentionSec * 1000,
              }
            : undefined,
      });
      return { store };
    }
  }
}

/** Keyv reports backend trouble as events; an unheard one would crash the process. */
function watch(keyv: Keyv, logger: Logger): Keyv {
  keyv.on("error", (err: unknown) => logger.error({ err }, "task store error"));
  return keyv;
}
