import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import type { TaskBackend, TaskBackendKind } from "./backends/task-backend.js";

export type { TaskBackend } from "./backends/task-backend.js";

/**
 * The kind of backend `store.url` names (`config.deployment.taskStore`): the
 * one place that tells the kinds apart. The embedded stores belong to one
 * process (in-process queues, webhook deliveries in the store's journal, an
 * EventEmitter); Redis (one server, a Sentinel set or a Cluster) serves any
 * number of replicas. Each kind's module is loaded only when named: Redis's
 * (ioredis, BullMQ: about a third of the start-up CPU of a service on the
 * embedded defaults) and SQLite's are not loaded by a service that does not
 * use them.
 */
async function taskBackendKind(config: Config): Promise<TaskBackendKind> {
  const deployment = config.deployment.taskStore;
  switch (deployment.kind) {
    case "memory":
      return (await import("./backends/memory-backend.js")).memoryBackend(config);
    case "sqlite":
      return (await import("./backends/sqlite-backend.js")).sqliteBackend(config, deployment.file);
    case "redis":
      return (await import("./backends/redis-backend.js")).redisBackend(config, deployment);
  }
}

/**
 * Opens the backend the deployment names: its store, queues, bus and what
 * else the kind offers (see {@link TaskBackend}). A new store's first sweep
 * runs before it is handed over: it marks where its expiry buckets start.
 */
export async function openTaskBackend(config: Config, logger: Logger): Promise<TaskBackend> {
  const backend = await (await taskBackendKind(config)).open(logger);
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
export async function probeTaskBackend(config: Config, logger: Logger): Promise<string> {
  return (await taskBackendKind(config)).probe(logger);
}
