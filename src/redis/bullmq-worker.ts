import type { Worker } from "bullmq";
import type { Logger } from "pino";
import { watchRedisClient, type RedisClient } from "./open-redis-client.js";

/**
 * A connection of its own for a BullMQ worker, whose commands wait out an
 * outage instead of failing at once (as BullMQ wants of a worker's
 * connection): failing at once, the worker's fetch loop would spin without
 * yielding and starve the process, reconnects included.
 */
export async function openWorkerConnection(
  client: RedisClient,
  logger: Logger,
  name: string,
): Promise<RedisClient> {
  const connection = client.duplicate({ disableOfflineQueue: false }) as RedisClient;
  watchRedisClient(connection, logger, name);
  await connection.connect();
  return connection;
}

/**
 * Stops a worker: it takes no more jobs, those running get `graceMs` to end,
 * then their processors' signals abort with `reason`; resolves once every
 * processor returned.
 */
export async function stopWorker(worker: Worker, graceMs: number, reason: string): Promise<void> {
  const closed = worker.close();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([closed, new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
  clearTimeout(timer);
  worker.cancelAllJobs(reason);
  await closed;
}
