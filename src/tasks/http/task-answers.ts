import type { IncomingMessage } from "node:http";
import type { TaskDeleted } from "../../contract/task-contract.js";
import { clientGone } from "../../http/client-gone.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";
import type { ImageReads } from "../images/image-reads.js";
import type { Submission } from "../service/submission.js";
import type { TaskService } from "../service/task-service.js";
import type { PresentDeps } from "../view/present-task.js";
import type { Sub2apiLimits } from "../view/sub2api-view.js";
import { nativeRouteDialect, showTask, type ShownTask } from "../view/show-task.js";
import { pollHeaders } from "./poll-headers.js";
import { readEdit, readGeneration, type TaskBodyLimits } from "./read-submission.js";
import { FinishedViews } from "./finished-views.js";
import { sendTaskView } from "./send-task-view.js";
import { setHeaders, type TaskRequest } from "./task-request.js";
import { idempotencyKeyOf, wantsEventStream } from "./submission-headers.js";
import type { TaskEventStreams } from "./task-event-streams.js";
import { parseListQuery, parsePreferWait, parseWaitQuery } from "./task-query.js";

export type { TaskBodyLimits } from "./read-submission.js";
export type { TaskRequest } from "./task-request.js";

/** What the task routes answer with. */
export interface TaskAnswersDeps {
  service: TaskService;
  images: ImageReads;
  eventStreams: TaskEventStreams;
  limits: TaskBodyLimits;
  /** `imageTasks.pollIntervalSec`: `Retry-After` of unfinished tasks. */
  pollIntervalSec: number;
  /** `imageTasks`' timeout and retention: what a sub2api task's `expires_at` reads. */
  taskLimits: Sub2apiLimits;
}

/** Reads a request header as one string (repeated ones joined, as Node joins most). */
function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

/**
 * The answers of the task API, one method per route of `TASK_ROUTES`, on
 * plain Node requests.
 */
export class TaskAnswers {
  /** The answers of finished tasks polled lately (see {@link FinishedViews}). */
  private readonly finished = new FinishedViews();

  constructor(private readonly deps: TaskAnswersDeps) {}

  /** `POST /v1/images/tasks`: a generation. */
  async submit(r: TaskRequest): Promise<void> {
    await this.answerSubmission(r, await readGeneration(r.req, this.deps.limits));
  }

  /** `POST /v1/images/edits/tasks`: an edit, from a multipart form or JSON. */
  async submitEdit(r: TaskRequest): Promise<void> {
    await this.answerSubmission(r, await readEdit(r.req, this.deps.limits));
  }

  /** `GET /v1/images/tasks`: a page of the caller's tasks, newest first unless `order=asc`. */
  async list(r: TaskRequest): Promise<void> {
    const page = await this.deps.service.list(r.principal, parseListQuery(r.query));
    const baseUrl = r.baseUrlOf();
    // No b64_json in a list: a page of 100 tasks of 10 images would be gigabytes. Signed links
    // to them instead, so a gallery shows every task's images without reading each task.
    const data = await Promise.all(
      page.records.map((record) => this.view(record, baseUrl, "listed", { thumbnails: true })),
    );
    const body = JSON.stringify({
      object: "list",
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: page.hasMore,
    });
    r.res.writeHead(200, {
      "Cache-Control": "no-store",
      "Content-Type": "application/json; charset=utf-8",
      "Content-Length": Buffer.byteLength(body),
    });
    r.res.end(body);
  }

  /**
   * `GET /v1/images/tasks/{id}` with `?wait=N`, and `?links=service` for the
   * service's own image links whatever `images.links` says (what the MCP
   * server downloads from).
   */
  async get(r: TaskRequest): Promise<void> {
    const wait = parseWaitQuery(r.query);
    // A wait of 0 answers at once: no need to watch for the client going away.
    const gone = wait > 0 ? clientGone(r.res) : undefined;
    const record = await this.deps.service.waitFor(r.principal, r.taskId, wait * 1000, gone);
    r.context.model = record.model;
    setHeaders(r.res, pollHeaders(record, this.deps.pollIntervalSec));
    const links = r.query.links === "service" ? { links: "service" as const } : {};
    const baseUrl = r.baseUrlOf();
    if (!isFinished(record.status) || r.req.method === "HEAD") {
      await sendTaskView(r.res, 200, await this.view(record, baseUrl, "full", links));
      return;
    }
    // A finished task's answer no longer changes: made once, then sent again as it is.
    const variant = `${links.links ?? ""} ${baseUrl}`;
    const kept = this.finished.get(record, variant);
    if (kept) {
      r.res.writeHead(200, kept.headers);
      r.res.end(kept.body);
      return;
    }
    await sendTaskView(r.res, 200, await this.view(record, baseUrl, "full", links), (body) =>
      this.finished.set(record, variant, body),
    );
  }

  /** `GET /v1/images/tasks/{id}/events`: the task's event stream. */
  async events(r: TaskRequest): Promise<void> {
    await this.deps.eventStreams.watch(r.req, r.res, r.principal, r.taskId, r.baseUrlOf());
  }

  /** `POST /v1/images/tasks/{id}/cancel`. */
  async cancel(r: TaskRequest): Promise<void> {
    const record = await this.deps.service.cancel(r.principal, r.taskId, r.context.reqId);
    r.context.model = record.model;
    setHeaders(r.res, pollHeaders(record, this.deps.pollIntervalSec));
    await sendTaskView(r.res, 200, await this.view(record, r.baseUrlOf(), "full"));
  }

  /**
   * `DELETE /v1/images/tasks/{id}`: the task and its images, at once (a
   * running one is cancelled first).
   */
  async delete(r: TaskRequest): Promise<void> {
    const record = await this.deps.service.delete(r.principal, r.taskId);
    this.finished.forget(record.id);
    r.context.model = record.model;
    const deleted: TaskDeleted = { id: record.id, object: "image.task.deleted", deleted: true };
    const body = JSON.stringify(deleted);
    r.res.writeHead(200, {
      "Cache-Control": "no-store",
      "Content-Type": "application/json; charset=utf-8",
      "Content-Length": Buffer.byteLength(body),
    });
    r.res.end(body);
  }

  /**
   * Creates the task (or replays it), then answers: with `Accept:
   * text/event-stream`, its event stream; with `Prefer: wait=N`, after up to
   * N seconds, 200 with the result if it finished by then; else 202.
   */
  private async answerSubmission(r: TaskRequest, submission: Submission): Promise<void> {
    // A stream's place is taken before the task exists: a refusal leaves no task behind.
    const release = wantsEventStream(r.req)
      ? this.deps.eventStreams.reserve(r.principal)
      : undefined;
    try {
      await this.createAndAnswer(r, submission);
    } finally {
      release?.();
    }
  }

  /** {@link answerSubmission} once a stream, if asked for, has its place. */
  private async createAndAnswer(r: TaskRequest, submission: Submission): Promise<void> {
    const { service } = this.deps;
    const { req, res, principal, context } = r;
    context.model = submission.request.model;
    const idempotencyKey = idempotencyKeyOf(req);
    const baseUrl = r.baseUrlOf();
    const wait = wantsEventStream(req) ? undefined : parsePreferWait(header(req, "prefer"));
    const { record, replayed } = await service.submit(principal, submission, {
      idempotencyKey,
      baseUrl,
      span: context.span,
      reqId: context.reqId,
    });
    context.taskId = record.id;
    const location = `${baseUrl}/v1/images/tasks/${record.id}`;
    if (wantsEventStream(req)) {
      await this.deps.eventStreams.watchSubmitted(res, principal, record, baseUrl, {
        Location: location,
        ...(replayed ? { "Idempotent-Replayed": "true" } : {}),
      });
      return;
    }
    let current = record;
    if (wait) {
      // The task exists whatever happens now: a failed wait answers what is known, 202.
      current = await service
        .waitFor(principal, record.id, wait * 1000, clientGone(res))
        .catch(() => record);
    }
    const finished = wait !== undefined && isFinished(current.status);
    setHeaders(res, pollHeaders(current, this.deps.pollIntervalSec));
    res.setHeader("Location", location);
    if (replayed) res.setHeader("Idempotent-Replayed", "true");
    if (finished) res.setHeader("Preference-Applied", `wait=${wait}`);
    await sendTaskView(
      res,
      finished ? 200 : 202,
      await this.view(current, baseUrl, finished || replayed ? "full" : "none"),
    );
  }

  /** The task as these routes show it: in sub2api's dialect for a sub2api task, else natively. */
  private view(
    record: TaskRecord,
    baseUrl: string,
    data: PresentDeps["data"],
    options: Pick<PresentDeps, "links" | "thumbnails"> = {},
  ): Promise<ShownTask> {
    const { images, taskLimits } = this.deps;
    const deps = { images, baseUrl, data, limits: taskLimits, ...options };
    return showTask(record, deps, nativeRouteDialect(record));
  }
}
