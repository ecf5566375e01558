import type { IncomingMessage, ServerResponse } from "node:http";
import type { ParsedUrlQuery } from "node:querystring";
import type { Principal } from "../../auth/principal.js";
import { clientGone } from "../../http/client-gone.js";
import type { RequestContext } from "../../observability/request-context.js";
import { readJsonBody, type JsonBodyOptions } from "../../http/json-body.js";
import { parseBody } from "../../errors/parse-body.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";
import type { ImageReads } from "../images/image-reads.js";
import type { Submission } from "../service/submission.js";
import type { TaskService } from "../service/task-service.js";
import { submitTaskSchema } from "../service/task-schemas.js";
import { presentTask, type PresentDeps, type TaskView } from "../view/present-task.js";
import {
  EDIT_FILE_FIELDS,
  MAX_EDIT_IMAGES,
  editFromForm,
  editFromJson,
} from "./edit-submission.js";
import { pollHeaders } from "./poll-headers.js";
import { isMultipart, readMultipartForm } from "./read-multipart-form.js";
import { sendTaskView } from "./send-task-view.js";
import { idempotencyKeyOf, wantsEventStream } from "./submission-headers.js";
import type { TaskEventStreams } from "./task-event-streams.js";
import { parseListQuery, parsePreferWait, parseWaitQuery } from "./task-query.js";

/** Text fields an edit form may have: the task's, with room for SDKs' extras to be refused by name. */
const MAX_FORM_FIELDS = 32;
/** One text field: a 32000-character prompt in any script fits. */
const MAX_FIELD_BYTES = 256 * 1024;

/** The body limits of the task routes. */
export interface TaskBodyLimits {
  /** A submission's JSON: a prompt and a few fields. */
  taskJson: JsonBodyOptions;
  /** An edit's JSON, its images as data: URLs, up to `server.maxUploadBytes`. */
  uploadJson: JsonBodyOptions;
  /** An edit's multipart body (`server.maxUploadBytes`). */
  maxUploadBytes: number;
  /** How long a body may take, in all and silent. */
  timing: { timeoutMs: number; idleMs: number };
}

/** What the task routes answer with. */
export interface TaskAnswersDeps {
  service: TaskService;
  images: ImageReads;
  eventStreams: TaskEventStreams;
  limits: TaskBodyLimits;
  /** `imageTasks.pollIntervalSec`: `Retry-After` of unfinished tasks. */
  pollIntervalSec: number;
}

/** One authenticated request to a task route. */
export interface TaskRequest {
  req: IncomingMessage;
  res: ServerResponse;
  principal: Principal;
  /** The `:taskId` of the route, decoded. */
  taskId: string;
  /** The request's context: its model, its span (a task's trace starts at its submission). */
  context: RequestContext;
  query: ParsedUrlQuery;
  /**
   * The origin of the request's image URLs and `Location` (see
   * `publicBaseUrl`), asked when the answer needs it, so a bad Host fails at
   * the same step on every route.
   */
  baseUrlOf: () => string;
}

/** Reads a request header as one string (repeated ones joined, as Node joins most). */
function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

function setHeaders(res: ServerResponse, headers: Record<string, string>): void {
  for (const name in headers) res.setHeader(name, headers[name] as string);
}

/**
 * The answers of the task API, one method per route of `TASK_ROUTES`, on
 * plain Node requests.
 */
export class TaskAnswers {
  constructor(private readonly deps: TaskAnswersDeps) {}

  /** `POST /v1/images/tasks`: a generation. */
  async submit(r: TaskRequest): Promise<void> {
    const parsed = await readJsonBody(r.req, this.deps.limits.taskJson);
    await this.answerSubmission(r, { request: parseBody(submitTaskSchema, parsed?.value) });
  }

  /** `POST /v1/images/edits/tasks`: an edit, from a multipart form or JSON. */
  async submitEdit(r: TaskRequest): Promise<void> {
    const { limits } = this.deps;
    let submission: Submission;
    if (isMultipart(r.req)) {
      const form = await readMultipartForm(r.req, {
        maxBytes: limits.maxUploadBytes,
        fileFields: EDIT_FILE_FIELDS,
        maxFiles: MAX_EDIT_IMAGES + 1,
        maxFields: MAX_FORM_FIELDS,
        maxFieldBytes: MAX_FIELD_BYTES,
        ...limits.timing,
      });
      submission = editFromForm(form);
    } else {
      submission = editFromJson((await readJsonBody(r.req, limits.uploadJson))?.value);
    }
    await this.answerSubmission(r, submission);
  }

  /** `GET /v1/images/tasks`: a page of the caller's tasks, newest first. */
  async list(r: TaskRequest): Promise<void> {
    const page = await this.deps.service.list(r.principal, parseListQuery(r.query));
    const baseUrl = r.baseUrlOf();
    // No b64_json in a list: a page of 100 tasks of 10 images would be gigabytes.
    const data = await Promise.all(
      page.records.map((record) => this.view(record, baseUrl, "listed")),
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
    const links = r.query.links === "service" ? "service" : undefined;
    await sendTaskView(r.res, 200, await this.view(record, r.baseUrlOf(), "full", links));
  }

  /** `GET /v1/images/tasks/{id}/events`: the task's event stream. */
  async events(r: TaskRequest): Promise<void> {
    await this.deps.eventStreams.watch(r.req, r.res, r.principal, r.taskId, r.baseUrlOf());
  }

  /** `POST /v1/images/tasks/{id}/cancel`. */
  async cancel(r: TaskRequest): Promise<void> {
    const record = await this.deps.service.cancel(r.principal, r.taskId);
    r.context.model = record.model;
    setHeaders(r.res, pollHeaders(record, this.deps.pollIntervalSec));
    await sendTaskView(r.res, 200, await this.view(record, r.baseUrlOf(), "full"));
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
    });
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

  private view(
    record: TaskRecord,
    baseUrl: string,
    data: PresentDeps["data"],
    links?: PresentDeps["links"],
  ): Promise<TaskView> {
    const { images } = this.deps;
    return presentTask(record, { images, baseUrl, data, ...(links ? { links } : {}) });
  }
}
