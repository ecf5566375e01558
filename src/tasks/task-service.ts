import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { Principal } from "../auth/principal.js";
import type { ChannelRegistry } from "../channels/channel-registry.js";
import type { Config } from "../config/config-schema.js";
import { AppError } from "../http/app-error.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { ModelAccess } from "../models/model-access.js";
import { isTaskModel } from "../models/model-pattern.js";
import { modelNotFound } from "../models/model-not-found.js";
import { createTaskFinisher } from "./task-finisher.js";
import type { TaskQueue } from "./task-queue.js";
import { TASK_ID_PATTERN, isFinished, newTaskId, type TaskRecord } from "./task-record.js";
import { createTaskRunner } from "./task-runner.js";
import { toUpstreamBody, type SubmitTaskRequest } from "./task-schemas.js";
import type { CreateResult, TaskStore } from "./task-store.js";

/** Dependencies of {@link createTaskService}. */
export interface TaskServiceDeps {
  config: Config;
  store: TaskStore;
  queue: TaskQueue;
  registry: ChannelRegistry;
  access: ModelAccess;
  metrics: Metrics;
  logger: Logger;
  /** Milliseconds since the epoch; injectable for expiry tests. */
  now?: () => number;
}

/** The async image-task feature: submit, read, cancel, run, reconcile, stop. */
export type TaskService = ReturnType<typeof createTaskService>;

/**
 * The task API's operations over the store and the queue. Running a task is
 * the runner's job ({@link createTaskRunner}); ending one, the finisher's.
 */
export function createTaskService(deps: TaskServiceDeps) {
  const { store, queue, metrics, logger } = deps;
  const limits = deps.config.imageTasks;
  const now = deps.now ?? Date.now;
  const seconds = () => Math.floor(now() / 1000);
  const finisher = createTaskFinisher({ store, metrics, limits, now });
  const runner = createTaskRunner({
    store,
    registry: deps.registry,
    finisher,
    metrics,
    logger,
    limits,
    now,
  });
  /** Submissions the store admitted that are not in the queue yet. */
  let admitting = 0;
  /** Set by stop(): a task accepted now would wait on a queue that no longer runs. */
  let stopping = false;

  const cancelled = {
    code: "cancelled",
    message: "The task was cancelled.",
    type: "cancelled",
  } as const;

  /** Reads a task the principal owns; anything else is the same 404. */
  async function get(principal: Principal, id: string): Promise<TaskRecord> {
    const notFound = () =>
      new AppError("task_not_found", `No task found with id '${id.slice(0, 80)}'.`, {
        param: "task_id",
      });
    if (!TASK_ID_PATTERN.test(id)) throw notFound();
    const record = await store.get(id);
    if (!record || record.owner !== principal.subject) throw notFound();
    if (
      isFinished(record.status) &&
      record.expires_at !== undefined &&
      record.expires_at <= seconds()
    ) {
      throw notFound();
    }
    return record;
  }

  return {
    get,
    /** The queue's runner. */
    run: runner.run,

    async submit(
      principal: Principal,
      request: SubmitTaskRequest,
      idempotencyKey?: string,
    ): Promise<{ record: TaskRecord; replayed: boolean }> {
      if (stopping) {
        throw new AppError("service_unavailable", "The service is shutting down; retry shortly.", {
          headers: { "Retry-After": "2" },
        });
      }
      if (!isTaskModel(request.model)) {
        throw new AppError(
          "unsupported_model",
          `The model '${request.model}' is not supported by the task API; use a gpt-image-* model.`,
          { param: "model" },
        );
      }
      if (deps.access.candidates(principal, request.model).length === 0) {
        throw modelNotFound(request.model);
      }
      const record: TaskRecord = {
        id: newTaskId(),
        owner: principal.subject,
        status: "queued",
        model: request.model,
        request: toUpstreamBody(request),
        responseFormat: request.response_format,
        created: seconds(),
        attempts: 0,
      };
      const idempotency = idempotencyKey
        ? {
            key: createHash("sha256").update(idempotencyKey).digest("base64url"),
            fingerprint: createHash("sha256").update(JSON.stringify(request)).digest("base64url"),
          }
        : undefined;
      // Decided inside the store's create, after the idempotency check (a retry is
      // answered even when the queue is full) and one submission at a time; tasks
      // admitted but not yet enqueued count, or concurrent submissions overfill the queue.
      let admitted = false;
      const admit = () => {
        const freeSlots = Math.max(0, limits.maxConcurrent - queue.running());
        if (queue.depth() + admitting >= limits.maxQueued + freeSlots) return false;
        admitting++;
        admitted = true;
        return true;
      };
      let result: CreateResult;
      try {
        result = await store.create(record, idempotency, admit);
        if (result.kind === "created") queue.enqueue(record.id);
      } finally {
        if (admitted) admitting--;
      }
      if (result.kind === "refused") {
        throw new AppError("queue_full", "Too many image tasks are waiting; retry later.", {
          headers: { "Retry-After": String(Math.max(limits.pollIntervalSec, 10)) },
        });
      }
      if (result.kind === "conflict") {
        throw new AppError(
          "idempotency_key_conflict",
          "This Idempotency-Key was already used with a different request body.",
          { param: "Idempotency-Key" },
        );
      }
      if (result.kind === "replayed") return { record: result.record, replayed: true };
      metrics.tasksSubmitted.inc();
      return { record, replayed: false };
    },

    /** Fails a queued or running task with `cancelled`; a finished one is returned as it is. */
    async cancel(principal: Principal, id: string): Promise<TaskRecord> {
      const record = await get(principal, id);
      if (record.status === "queued") {
        queue.remove(id);
        const failed = await finisher.fail(id, "queued", cancelled);
        if (failed) return failed;
      }
      if (record.status === "queued" || record.status === "in_progress") {
        // Written first, so the runner's own completion loses the race and the call is aborted.
        const failed = await finisher.fail(id, "in_progress", cancelled);
        runner.abort(id, "cancelled");
        if (failed) return failed;
      }
      return (await store.get(id)) ?? record;
    },

    /**
     * Makes sure every unfinished task in the store is either waiting in the
     * queue or running here: at start-up this picks up what a stopped process
     * left; run periodically, it catches a task a failed store write left
     * behind. A task found in progress that no one runs is run again until it
     * has started `maxAttempts` times, then fails `interrupted`. Only for
     * stores one process owns.
     */
    async reconcile(): Promise<void> {
      for (const record of await store.listUnfinished()) {
        if (runner.isRunning(record.id)) continue;
        if (record.status === "in_progress") {
          if (record.attempts >= limits.maxAttempts) {
            await finisher.fail(record.id, "in_progress", {
              code: "interrupted",
              message: "The service stopped while the task was running, too often to retry.",
              type: "interrupted",
            });
            continue;
          }
          const requeued = await store.transition(record.id, "in_progress", {
            status: "queued",
            started_at: undefined,
          });
          if (!requeued) continue;
          logger.info({ taskId: record.id }, "re-running a task no process is running");
        }
        queue.enqueue(record.id);
      }
    },

    /**
     * Stops taking tasks from the queue and gives the running ones `graceMs`
     * to finish; the rest are handed back (persistent store) or fail
     * `interrupted` (memory store).
     */
    async stop(graceMs: number): Promise<void> {
      stopping = true;
      const drained = queue.stop();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        drained,
        new Promise((resolve) => (timer = setTimeout(resolve, graceMs))),
      ]);
      clearTimeout(timer);
      runner.abortAll();
      await drained;
      await runner.close();
    },
  };
}
