import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { CredentialSealer } from "../../auth/credential-sealer.js";
import type { Principal } from "../../auth/principal.js";
import type { Config } from "../../config/config-schema.js";
import { ServiceError } from "../../errors/service-error.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { ModelAccess } from "../../models/model-access.js";
import { modelNotFound } from "../../models/model-not-found.js";
import { isTaskModel } from "../../channels/model-pattern.js";
import { validateWebhookUrl } from "../../webhooks/validate-webhook-url.js";
import { keyLimits } from "./key-limits.js";
import { taskLine } from "./task-line.js";
import type { QueueEntry, TaskQueue } from "../core/task-queue.js";
import type {
  CreateOptions,
  CreateResult,
  Idempotency,
  IdempotentAnswer,
  TaskStore,
} from "../core/task-store.js";
import { available } from "../../errors/store-unavailable.js";
import { newTaskId, type TaskRecord } from "../core/task-record.js";
import type { TaskImages } from "../images/task-images.js";
import { toUpstreamBody } from "./task-schemas.js";
import type { TaskFinisher } from "./task-finisher.js";
import type { EditInput, SubmitOptions, Submission } from "./submission.js";
import { logFields } from "../../logging/log-fields.js";

/** What {@link submitTask} works with. */
export interface SubmitDeps {
  config: Config;
  store: TaskStore;
  /** Where an edit's input images wait for their run. */
  images: Pick<TaskImages, "putInputs" | "deleteInputs">;
  queue: TaskQueue;
  access: ModelAccess;
  sealer?: CredentialSealer;
  /** Tells every replica of the new task (its `queued` event). */
  finisher: Pick<TaskFinisher, "announce">;
  metrics: Metrics;
  logger: Logger;
  now: () => number;
  /** Asks for an adoption pass soon: a task was written but could not be queued. */
  adoptSoon?: () => void;
}

/** A submitted task, and whether it was made by an earlier request with the same key. */
export interface Submitted {
  record: TaskRecord;
  replayed: boolean;
}

/**
 * Checks a submission (task model, the key's group, the webhook URL), then
 * admits it to the queue, writes the `queued` record and enqueues it; an
 * idempotent retry gets the task its key already made.
 */
export async function submitTask(
  deps: SubmitDeps,
  principal: Principal,
  submission: Submission,
  options: SubmitOptions,
): Promise<Submitted> {
  const record = await newTaskRecord(deps, principal, submission, options);
  const idempotency = options.idempotencyKey
    ? idempotencyOf(options.idempotencyKey, submission, record)
    : undefined;
  return admitTask(deps, principal, record, {
    idempotency,
    inputs: submission.inputs ?? [],
    span: options.span,
  });
}

/** Options of {@link admitTask}. */
export interface AdmitOptions {
  idempotency: Idempotency | undefined;
  /** An edit's images, kept before its task is written. */
  inputs?: readonly EditInput[];
  span?: SubmitOptions["span"] | undefined;
  /** What the task is, in refusals' messages. Default `image tasks`. */
  noun?: string;
  /** Runs once the task is written, before the queue has it (a background response's first events). */
  created?: (record: TaskRecord) => Promise<void>;
}

/**
 * Admits a checked task of any kind: an idempotent replay answered first,
 * then a place in the queue (`maxQueued` and the key's share), the record
 * written (with the key's retained share), its `queued` stage told, and the
 * queue given it.
 */
export async function admitTask(
  deps: SubmitDeps,
  principal: Principal,
  record: TaskRecord,
  options: AdmitOptions,
): Promise<Submitted> {
  const { config, store, queue, metrics, logger } = deps;
  const { idempotency } = options;
  const noun = options.noun ?? "image tasks";
  const share = keyLimits(config, principal.group);
  const entry: QueueEntry = { taskId: record.id, owner: record.owner };

  return available(async () => {
    // A retry is answered before admission: a full queue does not hide the task it made.
    const earlier = idempotency && (await store.findIdempotent(record.owner, idempotency));
    if (earlier) return answerIdempotent(earlier);
    const admission = await queue.admit(entry, {
      maxQueued: config.imageTasks.maxQueued,
      maxQueuedPerOwner: share.maxQueuedPerKey,
    });
    if (!admission.admitted) {
      throw new ServiceError(
        "queue_full",
        admission.reason === "owner_queue_full"
          ? `This key already has ${share.maxQueuedPerKey} ${noun} waiting, its share of the queue; retry when one has started.`
          : `Too many ${noun} are waiting; retry later.`,
        { retryAfter: Math.max(config.imageTasks.pollIntervalSec, 10) },
      );
    }
    const result = await createAdmitted(
      deps,
      record,
      entry,
      { idempotency, maxPerOwner: share.maxRetainedPerKey },
      options.inputs ?? [],
    );
    if (result.kind === "owner_full") {
      const { retentionSec } = config.imageTasks;
      throw new ServiceError(
        "too_many_tasks",
        `This key already holds ${share.maxRetainedPerKey} ${noun}; finished ones count until they expire (${retentionSec} s after they finished).`,
        { retryAfter: Math.min(retentionSec, 3600) },
      );
    }
    if (result.kind !== "created") return answerIdempotent(result);
    await options.created?.(record);
    // Before the queue has it: its `in_progress` comes after this, wherever it runs.
    deps.finisher.announce("queued", record);
    try {
      await queue.enqueue(entry);
    } catch (err) {
      // The task exists: an adoption pass gives it its place in the queue, in seconds.
      logger.warn({ err, taskId: record.id }, "could not enqueue a task; it is adopted later");
      deps.adoptSoon?.();
    }
    const dialect = record.dialect ?? "native";
    metrics.tasksSubmitted.inc({ dialect });
    options.span?.addEvent("image.task.queued", {
      "image_task.id": record.id,
      "image_task.dialect": dialect,
    });
    logFields(logger, "info", { ...taskLine(record), dialect }, "task.submitted");
    return { record, replayed: false };
  });
}

/** The `queued` record of a checked submission; a forward key's own key is sealed into it. */
async function newTaskRecord(
  deps: SubmitDeps,
  principal: Principal,
  submission: Submission,
  options: SubmitOptions,
): Promise<TaskRecord> {
  const { request, inputs } = submission;
  if (!isTaskModel(request.model)) {
    throw new ServiceError(
      "unsupported_model",
      `The model '${request.model}' is not supported by the task API; use a gpt-image-* model.`,
      { param: "model" },
    );
  }
  if (deps.access.candidates(principal, request.model).length === 0) {
    throw modelNotFound(request.model);
  }
  const webhookUrl = await validateWebhookUrl(request.webhook_url, {
    webhooks: deps.config.webhooks,
  });
  const nowMs = deps.now();
  const record: TaskRecord = {
    id: newTaskId(options.dialect === "sub2api" ? "imgtask_" : "task_"),
    owner: principal.subject,
    status: "queued",
    model: request.model,
    request: toUpstreamBody(request),
    responseFormat: request.response_format,
    // An edit's inputs join the record once the image store has them (see createAdmitted).
    kind: inputs ? "edit" : "generation",
    keyName: principal.keyName,
    group: principal.group,
    created: Math.floor(nowMs / 1000),
    createdMs: nowMs,
    attempts: 0,
  };
  if (request.partial_images) record.partialImages = request.partial_images;
  if (options.dialect) record.dialect = options.dialect;
  const { retentionSec } = deps.config.imageTasks;
  if (options.retentionSec !== undefined && options.retentionSec < retentionSec) {
    record.retentionSec = options.retentionSec;
  }
  if (webhookUrl) record.webhook = { url: webhookUrl, baseUrl: options.baseUrl };
  if (options.span?.traceparent) record.trace = options.span.traceparent;
  if (options.reqId) record.reqId = options.reqId;
  await sealCredential(deps, principal, record);
  return record;
}

/** A forward key's own key, sealed into its task's record (to run it as that user). */
export async function sealCredential(
  deps: Pick<SubmitDeps, "sealer">,
  principal: Principal,
  record: TaskRecord,
): Promise<void> {
  const { upstream } = principal;
  if (!upstream) return;
  const { sealer } = deps;
  if (!sealer) throw new Error("a forward principal without forward mode's sealer");
  // Sealed to this task's id: the key runs this task and no other.
  record.sealedCredential = await available(() =>
    sealer.seal(upstream.credential.reveal(), record.id),
  );
}

/**
 * The stored form of an `Idempotency-Key` and a fingerprint of everything the
 * submission asks for: a key reused in another dialect, or with another
 * retention, is a conflict, not the other task.
 */
function idempotencyOf(
  key: string,
  { request, inputs }: Submission,
  record: Pick<TaskRecord, "dialect" | "retentionSec">,
): Idempotency {
  const hash = createHash("sha256").update(JSON.stringify(request));
  // Native submissions hash as they always did: keys stored by earlier releases still match.
  if (record.dialect) hash.update(`\ndialect:${record.dialect}`);
  if (record.retentionSec !== undefined) hash.update(`\nretention:${record.retentionSec}`);
  for (const input of inputs ?? []) {
    hash.update(`\n${input.field}:${createHash("sha256").update(input.bytes).digest("hex")}`);
  }
  return {
    key: createHash("sha256").update(key).digest("base64url"),
    fingerprint: hash.digest("base64url"),
  };
}

function answerIdempotent(answer: IdempotentAnswer): Submitted {
  if (answer.kind === "conflict") {
    throw new ServiceError(
      "idempotency_key_conflict",
      "This Idempotency-Key was already used with a different request body.",
      { param: "Idempotency-Key" },
    );
  }
  return { record: answer.record, replayed: true };
}

/**
 * Creates the admitted task in the store, an edit's images first (a run
 * never finds its task without them); the queue place and the images go when
 * no task was made.
 */
async function createAdmitted(
  deps: SubmitDeps,
  record: TaskRecord,
  entry: QueueEntry,
  options: CreateOptions,
  inputs: readonly EditInput[],
): Promise<CreateResult> {
  const { store, queue, logger, images } = deps;
  const { retentionSec, timeoutSec } = deps.config.imageTasks;
  let result: CreateResult | undefined;
  try {
    if (inputs.length > 0) {
      // Kept as long as an idempotency key: a task that waits longer finds them gone and fails.
      const untilSec = record.created + retentionSec + timeoutSec;
      record.inputs = await images.putInputs(record.id, inputs, untilSec);
    }
    result = await store.create(record, options);
    return result;
  } finally {
    if (result?.kind !== "created") {
      await queue.release(entry).catch((err: unknown) => {
        logger.warn({ err }, "could not give back a queue place; it lapses on its own");
      });
      if (record.inputs) {
        await images.deleteInputs(record.inputs).catch((err: unknown) => {
          logger.warn({ err }, "could not delete an edit's images; their day's sweep will");
        });
      }
    }
  }
}
