import { createHash } from "node:crypto";
import type { Principal } from "../../auth/principal.js";
import { ServiceError } from "../../errors/service-error.js";
import { available } from "../../errors/store-unavailable.js";
import type { ResponseEventLog, ResponseState } from "../core/response-state.js";
import { newResponseId, type TaskRecord } from "../core/task-record.js";
import type { Idempotency } from "../core/task-store.js";
import {
  admitTask,
  sealCredential,
  type SubmitDeps,
  type Submitted,
} from "../service/submit-task.js";
import type { SubmitOptions } from "../service/submission.js";
import { responseShell } from "./response-object.js";

/** A background request as the passthrough read it: its body, and where it may run. */
export interface BackgroundRequest {
  /** The Responses body as the client sent it (`previous_response_id` as the channel knows it). */
  body: Record<string, unknown>;
  model: string;
  /** The one channel it may run on (the one holding its previous response). */
  pinned?: string;
  /** `previous_response_id` as the client sent it, when the channel is sent another id. */
  previous?: string;
}

/** What {@link submitResponse} works with. */
export interface SubmitResponseDeps extends SubmitDeps {
  log: ResponseEventLog;
}

/** Fields of the client's body the channel is not sent: the run streams, in the foreground. */
const NOT_SENT = ["background", "stream"];

/**
 * Makes a background response a task of kind `response` (the same admission,
 * key shares, idempotency and store as an image task) and logs its first
 * events (`response.created`, `response.queued`) before the queue has it.
 * A receiver configured on the key (`auth.keys[].webhookUrl`) is told of its
 * end when `webhooks.secret` is set.
 */
export async function submitResponse(
  deps: SubmitResponseDeps,
  principal: Principal,
  request: BackgroundRequest,
  options: SubmitOptions,
): Promise<Submitted> {
  if (request.body.store === false) {
    throw new ServiceError(
      "invalid_value",
      "A background response must be stored: drop 'store: false' or 'background: true'.",
      { param: "store" },
    );
  }
  const record = await newResponseRecord(deps, principal, request, options);
  const idempotency = options.idempotencyKey
    ? idempotencyOf(options.idempotencyKey, request.body)
    : undefined;
  return admitTask(deps, principal, record, {
    idempotency,
    span: options.span,
    noun: "background responses",
    created: (created) => logQueued(deps, created),
  });
}

async function newResponseRecord(
  deps: SubmitResponseDeps,
  principal: Principal,
  request: BackgroundRequest,
  options: SubmitOptions,
): Promise<TaskRecord> {
  const body = Object.fromEntries(
    Object.entries(request.body).filter(([name]) => !NOT_SENT.includes(name)),
  );
  const response: ResponseState = { group: principal.group };
  if (request.pinned !== undefined) response.pinned = request.pinned;
  if (request.previous !== undefined) response.previous = request.previous;
  else if (typeof body.previous_response_id === "string") {
    response.previous = body.previous_response_id;
  }
  const nowMs = deps.now();
  const record: TaskRecord = {
    id: newResponseId(),
    owner: principal.subject,
    status: "queued",
    model: request.model,
    kind: "response",
    request: body,
    responseFormat: "b64_json",
    keyName: principal.keyName,
    created: Math.floor(nowMs / 1000),
    createdMs: nowMs,
    attempts: 0,
    response,
  };
  if (principal.webhookUrl && deps.config.webhooks.secret) {
    record.webhook = { url: principal.webhookUrl, baseUrl: options.baseUrl };
  }
  if (options.span?.traceparent) record.trace = options.span.traceparent;
  await sealCredential(deps, principal, record);
  return record;
}

/**
 * `response.created` and `response.queued`, the first events of its stream.
 * Best effort: a log that cannot be written now leaves the stream to start at
 * `response.in_progress`.
 */
async function logQueued(deps: SubmitResponseDeps, record: TaskRecord): Promise<void> {
  const response = responseShell(record, "queued");
  const events = ["response.created", "response.queued"].map((type) => ({
    type,
    json: JSON.stringify({ type, response }),
  }));
  await available(() => deps.log.append(record.id, events)).catch((err: unknown) => {
    deps.logger.warn({ err, taskId: record.id }, "could not log a background response's events");
  });
}

/** The stored form of an `Idempotency-Key` and a fingerprint of the body it came with. */
function idempotencyOf(key: string, body: Record<string, unknown>): Idempotency {
  return {
    key: createHash("sha256").update(`response:${key}`).digest("base64url"),
    fingerprint: createHash("sha256").update(JSON.stringify(body)).digest("base64url"),
  };
}
