import type { Worker } from "bullmq";
import type { Logger } from "pino";
import { watchRedisClient, type RedisClient } from "./open-redis-client.js";
import { duplicateWaiting } from "./redis-topologies.js";

/** The longest a stop waits for BullMQ to close a worker once its jobs were cancelled. */
const CLOSE_BOUND_MS = 5_000;

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
  const connection = duplicateWaiting(client);
  watchRedisClient(connection, logger, name);
  await connection.connect().catch(() => undefined);
  return connection;
}

/**
 * Stops a worker: it takes no more jobs, those running get `graceMs` to end,
 * then their processors' signals abort with `reason` (and `graceOver` is
 * told, for what those signals no longer reach); resolves once every
 * processor returned. BullMQ's close is given {@link CLOSE_BOUND_MS} more at
 * most: past it, whatever it still waits for (a connection that will not
 * close) is left to the process's exit, with a warning.
 */
export async function stopWorker(
  worker: Worker,
  graceMs: number,
  reason: string,
  logger: Logger,
  graceOver?: () => void,
): Promise<void> {
  const closed = worker.close().then(
    () => true,
    () => true,
  );
  if (!(await within(closed, graceMs))) {
    graceOver?.();
    worker.cancelAllJobs(reason);
  }
  if (!(await within(closed, CLOSE_BOUND_MS))) {
    logger.warn(
      { worker: worker.name, waitedMs: graceMs + CLOSE_BOUND_MS },
      "a task queue worker did not close in time; stopping without it",
    );
  }
}

/** Whether `settled` resolved within `ms`. */
async function within(settled: Promise<boolean>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(resolve, ms, false)));
  const result = await Promise.race([settled, late]);
  clearTimeout(timer);
  return result;
}
