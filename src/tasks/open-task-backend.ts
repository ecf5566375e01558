import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import { memoryBackend } from "./backends/memory-backend.js";
import { redisBackend } from "./backends/redis-backend.js";
import { sqliteBackend } from "./backends/sqlite-backend.js";
import type { TaskBackend, TaskBackendKind } from "./backends/task-backend.js";

export type { TaskBackend } from "./backends/task-backend.js";

/**
 * The kind of backend `store.url` names (`config.deployment.taskStore`): the
 * one place that tells the kinds apart. The embedded stores belong to one
 * process (in-process queues, webhook deliveries in the store's journal, an
 * EventEmitter); Redis (one server, a Sentinel set or a Cluster) serves any
 * number of replicas.
 */
function taskBackendKind(config: Config): TaskBackendKind {
  const deployment = config.deployment.taskStore;
  switch (deployment.kind) {
    case "memory":
      return memoryBackend(config);
    case "sqlite":
      return sqliteBackend(config, deployment.file);
    case "redis":
      return redisBackend(config, deployment);
  }
}

/**
 * Opens the backend the deployment names: its store, queues, bus and what
 * else the kind offers (see {@link TaskBackend}). A new store's first sweep
 * runs before it is handed over: it marks where its expiry buckets start.
 */
export async function openTaskBackend(config: Config, logger: Logger): Promise<TaskBackend> {
  const backend = await taskBackendKind(config).open(logger);
  try {
    await backend.store.sweepExpired();
  } catch (err) {
    await backend.close().catch(() => undefined);
    throw err;
  }
  return backend;
}

/**
 * Checks the task store `store.url` names without taking it (for
 * `check-config --probe`): Redis answers `PING` (within
 * `store.connectTimeoutSec`); a SQLite file opens read-only and reads (the
 * service that holds it keeps its lock), or its folder can be written when
 * there is no file yet; memory always works. Resolves a short description of
 * what answered.
 * @throws Error whose message names `store.url` and the reason
 */
export function probeTaskBackend(config: Config, logger: Logger): Promise<string> {
  return taskBackendKind(config).probe(logger);
}
