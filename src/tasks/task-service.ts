import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { Principal } from "../auth/principal.js";
import type { ChannelRegistry } from "../channels/channel-registry.js";
import type { Config } from "../config/config-schema.js";
import { AppError } from "../http/app-error.js";
import { FINISH_REASONS, type Metrics } from "../metrics/create-metrics.js";
import type { GroupAccess } from "../models/group-access.js";
import { isTaskModel } from "../models/model-pattern.js";
import { modelNotFound } from "../models/create-models-router.js";
import { createSlowAgent, generateImages } from "./generate-images.js";
import { TaskFailure } from "./task-failure.js";
import type { TaskQueue } from "./task-queue.js";
import {
  TASK_ID_PATTERN,
  isFinished,
  newTaskId,
  type TaskError,
  type TaskRecord,
} from "./task-record.js";
import { toUpstreamBody, type SubmitTaskRequest } from "./task-schemas.js";
import type { CreateResult, TaskStore } from "./task-store.js";

/** The longest delay a Node timer takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Why a running task's upstream call was aborted. */
type AbortReason = "timeout" | "cancelled" | "shutdown";

/** Dependencies of {@link createTaskService}. */
export interface TaskServiceDeps {
  config: Config;
  store: TaskStore;
  queue: TaskQueue;
  registry: ChannelRegistry;
  access: GroupAccess;
  metrics: Metrics;
  logger: Logger;
  /** Milliseconds since the epoch; injectable for expiry tests. */
  now?: () => number;
}

/** The async image-task feature: submit, read, cancel, run, recover, stop. */
export type TaskService = ReturnType<typeof createTaskService>;

export function createTaskService(deps: TaskServiceDeps) {
  const { store, queue, metrics, logger } = deps;
  const limits = deps.config.imageTasks;
  const now = deps.now ?? Date.now;
  const seconds = () => Math.floor(now() / 1000);
  const retentionMs = limits.retentionSec * 1000;
  /**
   * `expires_at` of a task finishing at `atMs`: rounded up, so a task is
   * kept at least `retentionSec` (rounding down cut up to a second off).
   */
  const expiresAt = (atMs: number) => Math.ceil((atMs + retentionMs) / 1000);
  /**
   * Image bytes are written just before their task completes; the margin
   * keeps them from expiring a moment before the task record does.
   */
  const imageTtlMs = retentionMs + 60_000;
  const running = new Map<string, AbortController>();
  /** Submissions the store admitted that are not in the queue yet. */
  let admitting = 0;
  /** Set by stop(): a task accepted now would wait on a queue that no longer runs. */
  let stopping = false;
  const dispatcher = createSlowAgent();

  const finished = (record: TaskRecord) => {
    const reason = record.status === "completed" ? "ok" : (record.error?.code ?? "other");
    metrics.tasksFinished.inc({
      status: record.status,
      reason: FINISH_REASONS.has(reason) ? reason : "other",
    });
    if (record.error?.code === "timeout") metrics.taskTimeouts.inc();
    if (record.started_at !== undefined) {
      metrics.taskRunDuration.observe({ status: record.status }, now() / 1000 - record.started_at);
    }
  };

  const fail = (
    id: string,
    from: "queued" | "in_progress",
    error: TaskError,
  ): Promise<TaskRecord | undefined> => {
    const atMs = now();
    return store
      .transition(
        id,
        from,
        {
          status: "failed",
          completed_at: Math.floor(atMs / 1000),
          expires_at: expiresAt(atMs),
          error,
        },
        retentionMs,
      )
      .then((record) => {
        if (record) finished(record);
        return record;
      });
  };

  const cancelledError = (): TaskError => ({
    code: "cancelled",
    message: "The task was cancelled.",
    type: "cancelled",
  });

  /** Runs one task: in_progress, the channel call, then completed or failed. */
  async function run(id: string): Promise<void> {
    const queued = await store.get(id);
    if (!queued || queued.status !== "queued") return;
    const startedAtMs = now();
    const started = await store.transition(id, "queued", {
      status: "in_progress",
      started_at: Math.floor(startedAtMs / 1000),
      attempts: queued.attempts + 1,
    });
    if (!started) return;
    metrics.taskQueueWait.observe(Math.max(0, startedAtMs / 1000 - queued.created));
    const controller = new AbortController();
    running.set(id, controller);
    metrics.tasksInProgress.inc();
    // Node fires a timer over 2^31-1 ms (24.8 days) at once, so a longer timeout is capped.
    const timer = setTimeout(
      () => controller.abort("timeout" satisfies AbortReason),
      Math.min(limits.timeoutSec * 1000, MAX_TIMER_MS),
    );
    try {
      const candidates = deps.registry.candidates(started.model);
      if (candidates.length === 0) {
        throw new TaskFailure("upstream_unavailable", "No channel serves this model any more.");
      }
      const result = await generateImages({
        candidates,
        body: started.request,
        signal: controller.signal,
        metrics,
        logger,
        dispatcher,
      });
      await Promise.all(
        result.images.map((image, index) => store.putImage(id, index, image.bytes, imageTtlMs)),
      );
      const atMs = now();
      const completed = await store.transition(
        id,
        "in_progress",
        {
          status: "completed",
          completed_at: Math.floor(atMs / 1000),
          expires_at: expiresAt(atMs),
          images: result.images.map(({ mime, bytes, revised_prompt }) => ({
            mime,
            bytes: bytes.length,
            ...(revised_prompt === undefined ? {} : { revised_prompt }),
          })),
          ...(result.usage === undefined ? {} : { usage: result.usage }),
        },
        retentionMs,
      );
      if (completed) finished(completed);
      else await store.deleteImages(id, result.images.length); // cancelled meanwhile
    } catch (err) {
      await settleFailure(id, started, controller.signal, err);
    } finally {
      clearTimeout(timer);
      running.delete(id);
      metrics.tasksInProgress.dec();
    }
  }

  async function settleFailure(
    id: string,
    started: TaskRecord,
    signal: AbortSignal,
    err: unknown,
  ): Promise<void> {
    const reason = signal.aborted ? (signal.reason as AbortReason) : undefined;
    if (reason === "cancelled") return; // cancel() already wrote the failure
    if (reason === "shutdown") {
      if (store.persistent) {
        // Handed back, not counted as a run: the next process starts it afresh.
        await store.transition(id, "in_progress", {
          status: "queued",
          started_at: undefined,
          attempts: started.attempts - 1,
        });
        return;
      }
      await fail(id, "in_progress", {
        code: "interrupted",
        message: "The service stopped while the task was running.",
        type: "interrupted",
      });
      return;
    }
    let failure: TaskFailure;
    if (reason === "timeout") {
      failure = new TaskFailure(
        "timeout",
        `The image generation did not finish within ${limits.timeoutSec} seconds.`,
        "timeout",
      );
    } else if (err instanceof TaskFailure) {
      failure = err;
    } else {
      logger.error({ err, taskId: id }, "task failed unexpectedly");
      failure = new TaskFailure("upstream_error", "The image generation failed unexpectedly.");
    }
    await fail(id, "in_progress", failure.toTaskError());
  }

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
    run,

    /**
     * Writes a queued task and tells the queue; never waits for the channel.
     * With an idempotency key, a repeat with the same body answers the first task.
     */
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
      if (
        !deps.access.allows(principal.group, request.model) ||
        deps.registry.candidates(request.model).length === 0
      ) {
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
        const failed = await fail(id, "queued", cancelledError());
        if (failed) return failed;
      }
      if (record.status === "queued" || record.status === "in_progress") {
        const failed = await fail(id, "in_progress", cancelledError());
        running.get(id)?.abort("cancelled" satisfies AbortReason);
        if (failed) return failed;
      }
      return (await store.get(id)) ?? record;
    },

    /**
     * Picks up what a previous process left: queued tasks run in order; a
     * task it was running runs again until `maxAttempts`, then fails
     * `interrupted`. Only for stores one process owns.
     */
    async recover(): Promise<void> {
      for (const record of await store.listUnfinished()) {
        if (record.status === "in_progress") {
          if (record.attempts >= limits.maxAttempts) {
            await fail(record.id, "in_progress", {
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
          logger.info({ taskId: record.id }, "re-running a task a stopped process left running");
        }
        queue.enqueue(record.id);
      }
    },

    /** Queued tasks waiting for a slot (for the metrics gauge). */
    queueDepth: () => queue.depth(),

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
      for (const controller of running.values()) controller.abort("shutdown" satisfies AbortReason);
      await drained;
      await dispatcher.close();
    },
  };
}
