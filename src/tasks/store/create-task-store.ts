import Keyv from "keyv";
import type { Logger } from "pino";
import type { Config } from "../../config/config-schema.js";
import { openRedisClient, type RedisClient } from "../../redis/open-redis-client.js";
import { createKeyvTaskStore } from "./keyv-task-store.js";
import { openSqliteTaskStore } from "./open-sqlite-task-store.js";
import { createRedisTaskStore } from "./redis-task-store.js";
import type { TaskStore } from "../core/task-store.js";

/**
 * Opens the store named by `store.url`: `memory://`, `sqlite://PATH`
 * (relative to the working directory; its folder is created; locked to this
 * process) or Redis (on `client` when given, else on a client of its own).
 */
export async function createTaskStore(
  config: Config,
  logger: Logger,
  options: { client?: RedisClient } = {},
): Promise<TaskStore> {
  const store = await openTaskStore(config, logger, options.client);
  // The first sweep of a new store marks where expiry buckets start.
  await store.sweepExpired();
  return store;
}

async function openTaskStore(
  config: Config,
  logger: Logger,
  client: RedisClient | undefined,
): Promise<TaskStore> {
  const deployment = config.deployment.taskStore;
  // Idempotency keys must outlive the task they point at by the whole run.
  const idempotencyTtlMs = (config.imageTasks.retentionSec + config.imageTasks.timeoutSec) * 1000;
  switch (deployment.kind) {
    case "memory": {
      const keyv = new Keyv({ namespace: "its" });
      // Kept as they are, never serialized: the Map is this process's memory, so a
      // record costs its object and an image its bytes, not JSON and base64 text.
      keyv.serialize = undefined;
      keyv.deserialize = undefined;
      return createKeyvTaskStore(watch(keyv, logger), {
        persistent: false,
        idempotencyTtlMs,
        binaryImages: true,
      });
    }
    case "sqlite":
      return openSqliteTaskStore(deployment.file, {
        idempotencyTtlMs,
        logger: logger.child({ component: "store" }),
      });
    case "redis":
      return createRedisTaskStore({
        client:
          client ??
          (await openRedisClient({
            url: deployment.url,
            logger: logger.child({ component: "store" }),
            connectTimeoutMs: config.store.connectTimeoutSec * 1000,
            commandTimeoutMs: config.store.commandTimeoutSec * 1000,
          })),
        prefix: config.store.prefix,
        idempotencyTtlMs,
        ownsClient: client === undefined,
      });
  }
}

/** Keyv reports backend trouble as events; an unheard one would crash the process. */
function watch(keyv: Keyv, logger: Logger): Keyv {
  keyv.on("error", (err: unknown) => logger.error({ err }, "task store error"));
  return keyv;
}
