import { Queue, WaitingError, Worker, type Job } from "bullmq";
import type { Logger } from "pino";
import type { RedisClient } from "../../redis/open-redis-client.js";
import { openWorkerConnection, stopWorker } from "../../redis/bullmq-worker.js";
import { closeRedisClient } from "../../redis/open-redis-client.js";
import { logQueueOutages } from "../../redis/log-queue-outages.js";
import type { BullmqQueueKeys, RedisAdmissionKeys } from "../../redis/redis-keys.js";
import { redisScript } from "../../redis/redis-script.js";
import type { TaskEvents } from "../core/task-events.js";
import {
  HANDOVER,
  type Admission,
  type AdmissionLimits,
  type LeaseEnd,
  type QueueEntry,
  type TaskHandler,
  type TaskQueue,
} from "../core/task-queue.js";
import { runWideController } from "./run-wide-controller.js";

/** How long an admitted place waits for its task to be created before it lapses. */
const RESERVATION_MS = 60_000;

/** Options of {@link createBullmqQueue}. */
export interface BullmqQueueOptions {
  client: RedisClient;
  /** BullMQ's queue of image tasks (see `redis/redis-keys.ts`). */
  queueKeys: BullmqQueueKeys;
  /** The admission ledger beside it. */
  admission: RedisAdmissionKeys;
  /**
   * The ledger's client: default `client`. The backend's auto-pipelined store
   * client, so that a submission's ledger steps share writes with its store steps.
   */
  ledgerClient?: RedisClient;
  /** Tasks in progress across every replica (BullMQ's global concurrency). */
  maxConcurrent: number;
  /** Job lock duration: a dead replica's tasks are picked up within about three times this. */
  leaseMs: number;
  /** Reaches the replica running a task, for cancels. */
  events: TaskEvents;
  logger: Logger;
}

interface JobData {
  taskId: string;
  owner: string;
}

/*
 * The admission ledger, beside BullMQ's own keys: every task admitted and not
 * started (`waiting`), the same per owner, and the tasks running. A
 * reservation's score is the time it lapses; once its task exists the score
 * is +inf, and the place leaves the ledger when the job starts (waiting) and
 * when its run ends (running), both in the job's processor, which BullMQ runs
 * again until the job completes: no place leaks.
 */

/** KEYS: waiting, owner's waiting, running. */
const ADMIT = redisScript(`
local now = ARGV[1]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local free = math.max(0, tonumber(ARGV[6]) - redis.call('ZCARD', KEYS[3]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) + free then return 'queue_full' end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) + free then return 'owner_queue_full' end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 'ok'
`);

/*
 * The ledger's other steps, each a script rather than a MULTI: as atomic, and
 * a script joins the auto-pipelined batch of its tick where a MULTI is a
 * write of its own.
 */

/** KEYS: waiting, owner's waiting. ARGV: task id, `XX` to update only a place still there. */
const HOLD = redisScript(`
if ARGV[2] == 'XX' then
  redis.call('ZADD', KEYS[1], 'XX', '+inf', ARGV[1])
  redis.call('ZADD', KEYS[2], 'XX', '+inf', ARGV[1])
else
  redis.call('ZADD', KEYS[1], '+inf', ARGV[1])
  redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
end
return 1
`);

/** KEYS: waiting, owner's waiting. ARGV: task id. */
const RELEASE = redisScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`);

/** KEYS: waiting, owner's waiting, running. ARGV: task id. */
const START = redisScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], '+inf', ARGV[1])
return 1
`);

/**
 * The queue of a deployment on Redis: BullMQ (on ioredis, the client the
 * store uses: one server, a Sentinel set or a Cluster, where the hash-tagged
 * prefix keeps the queue's keys in one slot) with `setGlobalConcurrency` for the limit across replicas, job
 * locks as the running tasks' leases (renewed every half `leaseMs`; a dead
 * replica's jobs are found stalled and run again), the processor's
 * AbortSignal and `worker.cancelJob` to end a lease, and the task bus to
 * reach the replica running a task.
 */
export function createBullmqQueue(options: BullmqQueueOptions): TaskQueue {
  const { client, logger, queueKeys } = options;
  const queue = new Queue<JobData>(queueKeys.name, {
    connection: client,
    prefix: queueKeys.prefix,
    // BullMQ's event stream is read by no one here: keep it short.
    streams: { events: { maxLen: 100 } },
  });
  logQueueOutages(queue, logger, "queue");
  const s: BullmqState = {
    options,
    client,
    ledger: options.ledgerClient ?? client,
    queue,
    waiting: options.admission.waiting,
    running: options.admission.running,
    draining: runWideController(),
    graceOver: runWideController(),
  };

  return {
    admit: (entry, limits) => admit(s, entry, limits),
    release: (entry) => release(s, entry),
    async enqueue(entry) {
      await Promise.all([confirm(s, entry), addJob(s, entry)]);
    },
    adopt: (entries) => adopt(s, entries),
    remove: (entry) => remove(s, entry),
    async cancel(taskId) {
      s.worker?.cancelJob(taskId, "cancelled" satisfies LeaseEnd);
      await options.events.publish({ type: "cancel", taskId });
    },
    async counts() {
      const counts = await queue.getJobCounts("wait", "prioritized", "delayed", "active");
      return {
        waiting: (counts.wait ?? 0) + (counts.prioritized ?? 0) + (counts.delayed ?? 0),
        running: counts.active ?? 0,
      };
    },
    start: (taskHandler) => start(s, taskHandler),
    stop: (graceMs) => stop(s, graceMs),
  };
}

/** What the queue's steps share; `worker` and what goes with it exist once started. */
interface BullmqState {
  options: BullmqQueueOptions;
  client: RedisClient;
  /** Where the admission ledger is written (see {@link BullmqQueueOptions.ledgerClient}). */
  ledger: RedisClient;
  queue: Queue<JobData>;
  waiting: string;
  running: string;
  /** Aborted when a stop begins (see `TaskLease.draining`). */
  draining: AbortController;
  /** Aborted when a stop's grace runs out (see `TaskLease.stopped`). */
  graceOver: AbortController;
  handler?: TaskHandler;
  worker?: Worker<JobData>;
  workerClient?: RedisClient;
  unsubscribe?: () => void;
}

const ownerWaiting = (s: BullmqState, owner: string) => s.options.admission.ownerWaiting(owner);

function addJob(s: BullmqState, entry: QueueEntry) {
  return s.queue.add(
    "run",
    { taskId: entry.taskId, owner: entry.owner },
    {
      jobId: entry.taskId,
      removeOnComplete: true,
      removeOnFail: true,
      // A run rejects only when the store could not be written: try again, for ever.
      attempts: Number.MAX_SAFE_INTEGER,
      backoff: { type: "custom" },
    },
  );
}

/** Marks places as belonging to existing tasks (they no longer lapse). */
function hold(s: BullmqState, entry: QueueEntry) {
  return HOLD.run(s.ledger, [s.waiting, ownerWaiting(s, entry.owner)], [entry.taskId, ""]);
}

/**
 * {@link hold} for a place {@link admit} reserved, sent together with the
 * job (one round trip, not two): the job may start, and its processor take
 * the place out of the ledger, before this lands, so it only updates a
 * place still there (XX) and never puts back one that was taken.
 */
function confirm(s: BullmqState, entry: QueueEntry) {
  return HOLD.run(s.ledger, [s.waiting, ownerWaiting(s, entry.owner)], [entry.taskId, "XX"]);
}

async function admit(
  s: BullmqState,
  entry: QueueEntry,
  limits: AdmissionLimits,
): Promise<Admission> {
  const now = Date.now();
  const answer = await ADMIT.run(
    s.ledger,
    [s.waiting, ownerWaiting(s, entry.owner), s.running],
    [
      now,
      now + RESERVATION_MS,
      entry.taskId,
      limits.maxQueued,
      limits.maxQueuedPerOwner,
      s.options.maxConcurrent,
    ],
  );
  return answer === "ok"
    ? { admitted: true }
    : { admitted: false, reason: answer as "queue_full" | "owner_queue_full" };
}

async function release(s: BullmqState, entry: QueueEntry): Promise<void> {
  await RELEASE.run(s.ledger, [s.waiting, ownerWaiting(s, entry.owner)], [entry.taskId]);
}

async function adopt(s: BullmqState, entries: readonly QueueEntry[]): Promise<void> {
  for (const entry of entries) {
    if ((await s.queue.getJobState(entry.taskId)) !== "unknown") continue;
    s.options.logger.info({ taskId: entry.taskId }, "queueing a task that had no job");
    // Its reservation may have lapsed: the place is taken again, then the job made.
    await hold(s, entry);
    await addJob(s, entry);
  }
}

async function remove(s: BullmqState, entry: QueueEntry): Promise<boolean> {
  // A job that started is locked: BullMQ leaves it, and the caller cancels the run instead.
  const removed = (await s.queue.remove(entry.taskId)) === 1;
  if (removed) await release(s, entry);
  return removed;
}

/** The worker's processor: the place moves from waiting to running, the handler runs the task. */
async function processJob(
  s: BullmqState,
  job: Job<JobData>,
  token: string | undefined,
  signal?: AbortSignal,
) {
  const { ledger } = s;
  const { taskId, owner } = job.data;
  await START.run(ledger, [s.waiting, ownerWaiting(s, owner), s.running], [taskId]);
  const { handler } = s;
  const ended = await handler!({
    taskId,
    signal: signal as AbortSignal,
    draining: s.draining.signal,
    stopped: s.graceOver.signal,
  });
  const end = signal?.aborted ? (signal.reason as LeaseEnd) : undefined;
  if (end === "lost") throw new Error("the task's lease was lost"); // its new holder ends it
  if (end === "handback" || ended === HANDOVER) {
    // Back to the line at once: another replica takes it now, not after a lock expiry.
    await hold(s, { taskId, owner });
    await ledger.zrem(s.running, taskId);
    await job.moveToWait(token);
    throw new WaitingError();
  }
  await ledger.zrem(s.running, taskId);
}

async function start(s: BullmqState, taskHandler: TaskHandler): Promise<void> {
  const { options, client } = s;
  const { logger } = options;
  s.handler = taskHandler;
  await s.queue.setGlobalConcurrency(options.maxConcurrent);
  s.workerClient = await openWorkerConnection(client, logger, "worker");
  // Three parameters: BullMQ hands the AbortSignal only to a processor that declares it.
  const processor = (job: Job<JobData>, token: string | undefined, signal?: AbortSignal) =>
    processJob(s, job, token, signal);
  const worker = new Worker<JobData>(options.queueKeys.name, processor, {
    connection: s.workerClient,
    prefix: options.queueKeys.prefix,
    concurrency: options.maxConcurrent,
    lockDuration: options.leaseMs,
    // BullMQ looks every half of this and renews the locks it has not renewed for as long:
    // renewed every 1/12 to 1/6 of the lease (2.5 to 5 s by default), a lock outlives an event
    // loop that stalls for up to 5/6 of it (25 s by default) before its holder counts as dead.
    lockRenewTime: Math.max(1, Math.floor(options.leaseMs / 6)),
    stalledInterval: options.leaseMs,
    // Re-runs of a task whose holder died are counted and bounded by the runner
    // (imageTasks.maxAttempts), which fails it `interrupted`: BullMQ never gives up.
    maxStalledCount: Number.MAX_SAFE_INTEGER,
    // After an outage, a finished run's result is written back this soon (default 15 s).
    runRetryDelay: Math.min(options.leaseMs, 5_000),
    settings: {
      // The store could not be written: 1 s, 2 s, 4 s, ... up to 30 s.
      backoffStrategy: (attemptsMade: number) => Math.min(1000 * 2 ** (attemptsMade - 1), 30_000),
    },
  });
  s.worker = worker;
  logQueueOutages(worker, logger, "worker");
  // Another process may hold the task now: stop the upstream call, write nothing.
  worker.on("lockRenewalFailed", (jobIds: string[]) => {
    for (const jobId of jobIds) worker.cancelJob(jobId, "lost" satisfies LeaseEnd);
  });
  s.unsubscribe = options.events.subscribe((event) => {
    if (event.type === "cancel") worker.cancelJob(event.taskId, "cancelled" satisfies LeaseEnd);
  });
}

async function stop(s: BullmqState, graceMs: number): Promise<void> {
  // Runs that can be handed over (polls) go back to the line now, for the other replicas.
  s.draining.abort();
  s.unsubscribe?.();
  const handback = "handback" satisfies LeaseEnd;
  // BullMQ's hand-back at the grace's end cannot reach a run whose lease lapsed: graceOver does.
  if (s.worker)
    await stopWorker(s.worker, graceMs, handback, s.options.logger, () =>
      s.graceOver.abort(handback),
    );
  if (s.workerClient) await closeRedisClient(s.workerClient);
  await s.queue.close();
}
