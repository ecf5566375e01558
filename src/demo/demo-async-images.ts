import type { DemoJob } from "./demo-background-jobs.js";
import {
  DemoRequestError,
  invalidParam,
  readObjectBody,
  sendJson,
  sendOpenAiError,
} from "./demo-http-helpers.js";
import { generationRequest, readEditRequest, type DrawRequest } from "./demo-images.js";
import type { DemoContext, DemoHandler } from "./demo-route.js";

/*
 * The async image APIs of two gateways, answered by the demo (its jobs in
 * memory, finished after `imageDelayMs`), so a channel `type: demo` with
 * `async: sub2api` or `async: bifrost` can be tried with no gateway at all.
 */

/** How long a job's result is kept after it ends, in the answers' `expires_at`. */
const RESULT_TTL_SEC = 3600;

/** The request of an async submission: the synchronous route's body, never a stream. */
async function drawRequestOf(
  req: Parameters<DemoHandler>[0],
  kind: "generations" | "edits",
): Promise<DrawRequest> {
  const request =
    kind === "edits"
      ? await readEditRequest(req)
      : generationRequest((await readObjectBody(req)).value);
  if (request.stream) {
    throw new DemoRequestError(
      400,
      invalidParam("stream", "Async image jobs do not stream: drop 'stream: true'."),
    );
  }
  return request;
}

/** Seconds until a job is likely done, for `Retry-After`: 1 to 3. */
function retryAfter(job: DemoJob, context: DemoContext): string {
  const left = job.createdAt * 1000 + context.imageDelayMs - Date.now();
  return String(Math.min(3, Math.max(1, Math.ceil(left / 1000))));
}

/** The job a poll route names (a restored one included), or the dialect's 404. */
function jobOf(context: DemoContext, url: URL): DemoJob {
  const id = decodeURIComponent(url.pathname.split("/").at(-1) ?? "");
  const job = context.jobs.get(id, context.imageDelayMs);
  if (!job || job.dialect === "openai-background") {
    throw new DemoRequestError(404, {
      message: `No image job with id '${id.slice(0, 100)}'.`,
      type: "invalid_request_error",
      code: "not_found",
    });
  }
  return job;
}

/** sub2api's view of a job: `processing`, `completed` with `result`, or `failed` with `error`. */
function sub2apiView(job: DemoJob): Record<string, unknown> {
  const view: Record<string, unknown> = {
    id: job.id,
    task_id: job.id,
    object: "image.generation.task",
    status:
      job.state === "running" ? "processing" : job.state === "completed" ? "completed" : "failed",
    created_at: job.createdAt,
    expires_at: (job.completedAt ?? job.createdAt) + RESULT_TTL_SEC,
    poll_url: `/v1/images/tasks/${job.id}`,
  };
  if (job.state === "completed") {
    view.http_status = 200;
    view.result = job.result;
    view.completed_at = job.completedAt;
  } else if (job.state !== "running") {
    view.http_status = job.state === "cancelled" ? 499 : (job.httpStatus ?? 500);
    view.error =
      job.state === "cancelled"
        ? { type: "invalid_request_error", code: "cancelled", message: "The job was cancelled." }
        : { type: job.error?.type, code: job.error?.code, message: job.error?.message };
    view.completed_at = job.completedAt;
  }
  return view;
}

/** `POST /v1/images/generations/async` and `/v1/images/edits/async` (sub2api). */
export function sub2apiSubmit(kind: "generations" | "edits"): DemoHandler {
  return async (req, res, context) => {
    const job = context.jobs.start("sub2api", await drawRequestOf(req, kind), context.imageDelayMs);
    res.setHeader("location", `/v1/images/tasks/${job.id}`);
    res.setHeader("retry-after", retryAfter(job, context));
    res.setHeader("cache-control", "no-store");
    sendJson(res, 202, sub2apiView(job));
  };
}

/** `GET /v1/images/tasks/{id}` (sub2api): 200 whatever the job's status. */
export const sub2apiPoll: DemoHandler = async (req, res, context, url) => {
  req.resume();
  const job = jobOf(context, url);
  if (job.state === "running") res.setHeader("retry-after", retryAfter(job, context));
  res.setHeader("cache-control", "no-store");
  sendJson(res, 200, sub2apiView(job));
};

/** Bifrost's view of a job: `pending`/`processing`, `completed` with `result`, or `failed`. */
function bifrostView(job: DemoJob, submitted = false): Record<string, unknown> {
  const status = job.state === "running" ? (submitted ? "pending" : "processing") : job.state;
  const view: Record<string, unknown> = {
    id: job.id,
    status: status === "cancelled" ? "failed" : status,
    created_at: job.createdAt,
    expires_at: (job.completedAt ?? job.createdAt) + RESULT_TTL_SEC,
  };
  if (job.completedAt !== undefined) view.completed_at = job.completedAt;
  if (job.state === "completed") view.result = job.result;
  if (job.state === "failed" || job.state === "cancelled") {
    view.status_code = job.state === "cancelled" ? 499 : (job.httpStatus ?? 500);
    view.error =
      job.state === "cancelled"
        ? { message: "The job was cancelled.", type: "cancelled", code: "cancelled" }
        : { message: job.error?.message, type: job.error?.type, code: job.error?.code };
  }
  return view;
}

/** `POST /v1/async/images/generations` and `/v1/async/images/edits` (Bifrost). */
export function bifrostSubmit(kind: "generations" | "edits"): DemoHandler {
  return async (req, res, context) => {
    const job = context.jobs.start("bifrost", await drawRequestOf(req, kind), context.imageDelayMs);
    sendJson(res, 202, bifrostView(job, true));
  };
}

/** `GET /v1/async/images/generations/{id}` (or edits; Bifrost): 202 while it runs, then 200. */
export const bifrostPoll: DemoHandler = async (req, res, context, url) => {
  req.resume();
  const job = jobOf(context, url);
  if (job.state === "running") {
    sendJson(res, 202, bifrostView(job));
    return;
  }
  sendJson(res, 200, bifrostView(job));
};

/** A 404 for a route the demo's async APIs do not have, in the OpenAI envelope. */
export function notFound(res: Parameters<DemoHandler>[1], what: string): void {
  sendOpenAiError(res, 404, { message: `Unknown ${what}.`, code: "not_found" });
}
