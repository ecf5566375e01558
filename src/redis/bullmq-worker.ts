import type { Worker } from "bullmq";
import type { Logger } from "pino";
import { isCluster } from "./command-deadlines.js";
import { watchRedisClient, type RedisClient } from "./open-redis-client.js";

/**
 * A connection of its own for a BullMQ worker (a duplicate of the service's
 * client: same deployment, same deadlines), whose commands wait out an outage
 * or a failover instead of failing at once (as BullMQ wants of a worker's
 * connection; failing at once, its fetch loop would spin). BullMQ makes its
 * blocking connection from it.
 */
export async function openWorkerConnection(
  client: RedisClient,
  logger: Logger,
  name: string,
): Promise<RedisClient> {
  const connection = (
    isCluster(client)
      ? client.duplicate([], { enableOfflineQueue: true })
      : client.duplicate({ enableOfflineQueue: true })
  ) as RedisClient;
  watchRedisClient(connection, logger, name);
  await connection.connect().catch(() => undefined);
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
