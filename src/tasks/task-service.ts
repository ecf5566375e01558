import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { Principal } from "../auth/principal.js";
import type { CredentialSealer } from "../auth/credential-sealer.js";
import type { Config } from "../config/config-schema.js";
import { AppError } from "../http/app-error.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { ModelAccess } from "../models/model-access.js";
import { isTaskModel } from "../models/model-pattern.js";
import { modelNotFound } from "../models/model-not-found.js";
import { validateWebhookUrl } from "../webhooks/validate-webhook-url.js";
import { keyLimits } from "./key-limits.js";
import type { QueueEntry, TaskQueue } from "./queue/task-queue.js";
import type {
  CreateOptions,
  CreateResult,
  IdempotentAnswer,
  OwnedPage,
  TaskStore,
} from "./store/task-store.js";
import type { TaskFinisher } from "./task-finisher.js";
import {
  TASK_ID_PATTERN,
  isFinished,
  newTaskId,
  type TaskInput,
  type TaskRecord,
  type TaskStatus,
} from "./task-record.js";
import { toUpstreamBody, type SubmitTaskRequest } from "./task-schemas.js";
import type { TaskWaiters } from "./task-waiters.js";

/** Dependencies of {@link createTaskService}. */
export interface TaskServiceDeps {
  config: Config;
  store: TaskStore;
  queue: TaskQueue;
  finisher: TaskFinisher;
  access: ModelAccess;
  /** Forward mode's sealer; a forward key's task cannot be taken without it. */
  sealer?: CredentialSealer;
  metrics: Metrics;
  logger: Logger;
  /** Requests waiting for tasks to finish. */
  waiters: TaskWaiters;
  /** Milliseconds since the epoch; injectable for expiry tests. */
  now: () => number;
}

/** An edit's input image, checked (PNG, JPEG or WebP), as the route read it. */
export interface EditInput {
  field: TaskInput["field"];
  mime: string;
  bytes: Buffer;
}

/** What a submission asks for: a generation, or an edit of `inputs`. */
export interface Submission {
  /** The parsed fields (an edit's besides its images). */
  request: SubmitTaskRequest;
  /** An edit's images, in the order they go to the channel; absent for a generation. */
  inputs?: EditInput[];
}

/** How a submission came. */
export interface SubmitOptions {
  idempotencyKey?: string;
  /** The origin the client reached the service at: the base of image URLs in its webhook event. */
  baseUrl: string;
}

/** A page of the task list. */
export interface ListQuery {
  limit: number;
  after?: string;
  status?: TaskStatus;
}

/** The longest an edit's inputs wait for their task in the store (see `TaskStore.putInput`). */
const INPUT_TTL_MS = 7 * 24 * 3600 * 1000;

/** The task API's operations: submit, read, list, wait, cancel. */
export type TaskService = ReturnType<typeof createTaskService>;

/**
 * Runs a step on the store or the queue; their failure (Redis away, a disk
 * error) becomes 503 `store_unavailable`, never a 500 or a wrong 404.
 */
export async function available<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw new AppError("store_unavailable", "The task store cannot be reached; retry shortly.", {
      headers: { "Retry-After": "5" },
      cause: err,
    });
  }
}

/**
 * Submit, read and cancel, over the store and the queue. Running a task is
 * the runner's job; ending one, the finisher's.
 */
export function createTaskService(deps: TaskServiceDeps) {
  const { config, store, queue, finisher, metrics, logger, waiters, now } = deps;
  const limits = config.imageTasks;
  const seconds = () => Math.floor(now() / 1000);
  /** Set by stopAccepting(): a task accepted now would wait on a queue that no longer runs. */
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
    const record = await available(() => store.get(id));
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

  function answerIdempotent(answer: IdempotentAnswer) {
    if (answer.kind === "conflict") {
      throw new AppError(
        "idempotency_key_conflict",
        "This Idempotency-Key was already used with a different request body.",
        { param: "Idempotency-Key" },
      );
    }
    return { record: answer.record, replayed: true };
  }

  /**
   * Creates the admitted task in the store, an edit's images first (a run
   * never finds its task without them); the place and the images go when no
   * task was made.
   */
  async function create(
    record: TaskRecord,
    entry: QueueEntry,
    options: CreateOptions,
    inputs: readonly EditInput[],
  ): Promise<CreateResult> {
    let result: CreateResult | undefined;
    try {
      await Promise.all(
        inputs.map((input, index) => store.putInput(record.id, index, input.bytes, INPUT_TTL_MS)),
      );
      result = await store.create(record, options);
      return result;
    } finally {
      if (result?.kind !== "created") {
        await queue.release(entry).catch((err: unknown) => {
          logger.warn({ err }, "could not give back a queue place; it lapses on its own");
        });
        if (inputs.length > 0) {
          await store.deleteInputs(record.id, inputs.length).catch((err: unknown) => {
            logger.warn({ err }, "could not delete an edit's images; they expire on their own");
          });
        }
      }
    }
  }

  /** A fingerprint of everything the submission asks for, an edit's image bytes included. */
  function fingerprint({ request, inputs }: Submission): string {
    const hash = createHash("sha256").update(JSON.stringify(request));
    for (const input of inputs ?? []) {
      hash.update(`\n${input.field}:${createHash("sha256").update(input.bytes).digest("hex")}`);
    }
    return hash.digest("base64url");
  }

  return {
    get,

    async submit(
      principal: Principal,
      submission: Submission,
      options: SubmitOptions,
    ): Promise<{ record: TaskRecord; replayed: boolean }> {
      const { request, inputs = [] } = submission;
      const { idempotencyKey } = options;
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
      const webhookUrl = await validateWebhookUrl(request.webhook_url, {
        webhooks: config.webhooks,
      });
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
      if (submission.inputs) {
        record.kind = "edit";
        record.inputs = inputs.map(({ field, mime, bytes }) => ({
          field,
          mime,
          bytes: bytes.length,
        }));
      }
      if (webhookUrl) record.webhook = { url: webhookUrl, baseUrl: options.baseUrl };
      const idempotency = idempotencyKey
        ? {
            key: createHash("sha256").update(idempotencyKey).digest("base64url"),
            fingerprint: fingerprint(submission),
          }
        : undefined;
      const { upstream } = principal;
      if (upstream) {
        const { sealer } = deps;
        if (!sealer) throw new Error("a forward principal without forward mode's sealer");
        // Sealed to this task's id: the key runs this task and no other.
        record.sealedCredential = await available(() =>
          sealer.seal(upstream.credential.reveal(), record.id),
        );
      }
      const share = keyLimits(config, principal.group);
      const entry: QueueEntry = { taskId: record.id, owner: record.owner };

      return available(async () => {
        // A retry is answered before admission: a full queue does not hide the task it made.
        const earlier = idempotency && (await store.findIdempotent(record.owner, idempotency));
        if (earlier) return answerIdempotent(earlier);
        const admission = await queue.admit(entry, {
          maxQueued: limits.maxQueued,
          maxQueuedPerOwner: share.maxQueuedPerKey,
        });
        if (!admission.admitted) {
          throw new AppError(
            "queue_full",
            admission.reason === "owner_queue_full"
              ? `This key already has ${share.maxQueuedPerKey} image tasks waiting, its share of the queue; retry when one has started.`
              : "Too many image tasks are waiting; retry later.",
            { headers: { "Retry-After": String(Math.max(limits.pollIntervalSec, 10)) } },
          );
        }
        const result = await create(
          record,
          entry,
          { idempotency, maxPerOwner: share.maxRetainedPerKey },
          inputs,
        );
        if (result.kind === "owner_full") {
          throw new AppError(
            "too_many_tasks",
            `This key already holds ${share.maxRetainedPerKey} image tasks; finished ones count until they expire (${limits.retentionSec} s after they finished).`,
            { headers: { "Retry-After": String(Math.min(limits.retentionSec, 3600)) } },
          );
        }
        if (result.kind !== "created") return answerIdempotent(result);
        try {
          await queue.enqueue(entry);
        } catch (err) {
          // The task exists: the maintenance pass gives it its place in the queue.
          logger.warn({ err, taskId: record.id }, "could not enqueue a task; it is adopted later");
        }
        metrics.tasksSubmitted.inc();
        return { record, replayed: false };
      });
    },

    /**
     * The task once it has finished, or after `waitMs` as it is then: a
     * request waiting here holds no worker slot and reads the store twice
     * (before and after), whatever the wait. It listens for the task's
     * `finished` event (from whichever replica ends it) before its first read,
     * so a finish in between is not missed. A client that goes away
     * (`signal`) or a service that stops ends the wait at once.
     */
    async waitFor(
      principal: Principal,
      id: string,
      waitMs: number,
      signal?: AbortSignal,
    ): Promise<TaskRecord> {
      if (waitMs <= 0) return get(principal, id);
      const watch = waiters.watch(id);
      try {
        const record = await get(principal, id);
        if (isFinished(record.status)) return record;
        const why = await watch.until(waitMs, signal);
        // Nobody is left to answer: no need to read again.
        if (why === "aborted") return record;
        return await get(principal, id);
      } finally {
        watch.dispose();
      }
    },

    /**
     * A page of the principal's own tasks, newest first; `after` must be one
     * of them (an unknown one is the caller's mistake, or has expired).
     */
    async list(principal: Principal, query: ListQuery): Promise<OwnedPage> {
      const page = await available(() =>
        store.listOwned(principal.subject, { ...query, nowSec: seconds() }),
      );
      if (!page) {
        throw new AppError(
          "invalid_value",
          `Invalid 'after': no task '${(query.after ?? "").slice(0, 80)}' among this key's tasks (it may have expired).`,
          { param: "after" },
        );
      }
      return page;
    },

    /** Fails a queued or running task with `cancelled`; a finished one is returned as it is. */
    async cancel(principal: Principal, id: string): Promise<TaskRecord> {
      const record = await get(principal, id);
      return available(async () => {
        const entry = { taskId: id, owner: record.owner };
        if (record.status === "queued") {
          const failed = await finisher.fail(id, "queued", cancelled);
          if (failed) {
            // Best effort: a job left behind finds its task failed and ends at once.
            await queue.remove(entry).catch(() => false);
            return failed;
          }
        }
        if (record.status === "queued" || record.status === "in_progress") {
          // Written first, so the run's own completion loses the race; then its call is aborted.
          const failed = await finisher.fail(id, "in_progress", cancelled);
          if (failed) {
            // Best effort: a run that misses the message sees the failure on its next check.
            await queue.cancel(id).catch((err: unknown) => {
              logger.warn({ err, taskId: id }, "could not reach the run of a cancelled task");
            });
            return failed;
          }
        }
        return (await store.get(id)) ?? record;
      });
    },

    /**
     * New submissions get 503 from now on (the service is stopping), and
     * waiting requests answer at once with the task as it is.
     */
    stopAccepting(): void {
      stopping = true;
      waiters.release();
    },
  };
}
