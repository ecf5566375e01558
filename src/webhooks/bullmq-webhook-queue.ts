import { Queue, UnrecoverableError, WaitingError, Worker, type Job } from "bullmq";
import type { Logger } from "pino";
import type { WebhooksConfig } from "../config/config-schema.js";
import { logQueueOutages } from "../redis/log-queue-outages.js";
import { openWorkerConnection, stopWorker } from "../redis/bullmq-worker.js";
import { closeRedisClient, type RedisClient } from "../redis/open-redis-client.js";
import type { BullmqQueueKeys } from "../redis/redis-keys.js";
import { retryDelaySec } from "./delivery-policy.js";
import type { WebhookDelivery } from "./webhook-delivery.js";
import type { AttemptDelivery, WebhookQueue } from "./webhook-queue.js";

/**
 * How long a delivered or given-up job is kept: while it is, adding the same
 * event again (the outbox pass after a crash) is a no-op.
 */
const KEEP_DONE_SEC = 3600;
const KEEP_FAILED_SEC = 24 * 3600;

/** Options of {@link createBullmqWebhookQueue}. */
export interface BullmqWebhookQueueOptions {
  client: RedisClient;
  /** BullMQ's queue of webhook deliveries, beside (never inside) the task queue. */
  queueKeys: BullmqQueueKeys;
  config: WebhooksConfig;
  /**
   * Job lock duration (`imageTasks.leaseSec`): the attempts of a replica that
   * died are made again elsewhere within about three times this.
   */
  leaseMs: number;
  logger: Logger;
}

/**
 * The webhook queue of a deployment on Redis: one BullMQ job per event (job
 * id = event id, so an event is queued once), retried by BullMQ on the
 * configured schedule (a custom backoff over `retryScheduleSec`) up to
 * `maxAttempts`. The job lock makes each attempt run on one replica at a
 * time; a replica that dies mid-attempt leaves a stalled job that another
 * replica attempts again (same number, same `webhook-id`). Workers take at
 * most `webhooks.maxConcurrent` deliveries per replica, apart from the task
 * queue's slots.
 */
export function createBullmqWebhookQueue(options: BullmqWebhookQueueOptions): WebhookQueue {
  const { client, logger, config } = options;
  const { name, prefix } = options.queueKeys;
  const queue = new Queue<WebhookDelivery>(name, {
    connection: client,
    prefix,
    streams: { events: { maxLen: 100 } },
  });
  logQueueOutages(queue, logger, "webhook-queue");
  let worker: Worker<WebhookDelivery> | undefined;
  let workerClient: RedisClient | undefined;

  return {
    async add(delivery) {
      await queue.add("deliver", delivery, {
        jobId: delivery.eventId,
        attempts: config.maxAttempts,
        backoff: { type: "webhook" },
        removeOnComplete: { age: KEEP_DONE_SEC },
        removeOnFail: { age: KEEP_FAILED_SEC },
      });
    },

    async start(attempt: AttemptDelivery) {
      const process = async (
        job: Job<WebhookDelivery>,
        token: string | undefined,
        signal?: AbortSignal,
      ) => {
        const stop = signal ?? new AbortController().signal;
        // attemptsMade counts the failed attempts; a stalled one (its replica died) is made again.
        const report = await attempt(job.data, job.attemptsMade + 1, { signal: stop }).catch(
          (err: unknown) => {
            if (stop.aborted) return undefined;
            throw err;
          },
        );
        if (!report) {
          // Stopped mid-attempt: back to the line, not counted; another replica makes it.
          await job.moveToWait(token);
          throw new WaitingError();
        }
        if (report.next.action === "retry") throw new Error(report.detail);
        if (report.next.result !== "delivered") throw new UnrecoverableError(report.detail);
      };
      workerClient = await openWorkerConnection(client, logger, "webhook-worker");
      worker = new Worker<WebhookDelivery>(name, process, {
        connection: workerClient,
        prefix,
        concurrency: config.maxConcurrent,
        lockDuration: options.leaseMs,
        stalledInterval: options.leaseMs,
        // An attempt that died with its replica is not a failed attempt: never give up on it.
        maxStalledCount: Number.MAX_SAFE_INTEGER,
        runRetryDelay: 5_000,
        settings: {
          backoffStrategy: (attemptsMade: number) =>
            retryDelaySec(attemptsMade, config.retryScheduleSec) * 1000,
        },
      });
      logQueueOutages(worker, logger, "webhook-worker");
    },

    async stop(graceMs) {
      if (worker) await stopWorker(worker, graceMs, "stopping", logger);
      if (workerClient) await closeRedisClient(workerClient);
      await queue.close();
    },
  };
}
