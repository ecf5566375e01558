import type { IncomingMessage } from "node:http";
import { Router, type Request, type RequestHandler, type Response } from "express";
import { getPrincipal } from "../../auth/principal.js";
import { parseBody } from "../../http/parse-body.js";
import { publicBaseUrl } from "../../http/public-base-url.js";
import type { BodyTiming } from "../../http/watch-body.js";
import type { ImageTasks } from "../create-image-tasks.js";
import { submitAndWatch, wantsEventStream } from "../events/submit-and-watch.js";
import {
  EDIT_FILE_FIELDS,
  MAX_EDIT_IMAGES,
  editFromForm,
  editFromJson,
} from "./edit-submission.js";
import { pollHeaders as headersOf } from "./poll-headers.js";
import { presentTask, type PresentDeps } from "../view/present-task.js";
import { isMultipart, readMultipartForm } from "./read-multipart-form.js";
import { sendTaskView } from "../view/send-task-view.js";
import { createTaskAnswers } from "./task-answers.js";
import type { TaskRecord } from "../task-record.js";
import { submitTaskSchema } from "../task-schemas.js";
import { parseListQuery } from "./task-query.js";
import type { Submission } from "../service/task-service.js";

/** Dependencies of {@link createTasksRouter}. */
export interface TasksRouterDeps {
  /** Parses the JSON body of the POST routes. */
  jsonBody: RequestHandler;
  /** Parses the JSON body of an image edit (its images are data: URLs), up to `maxUploadBytes`. */
  uploadJsonBody: RequestHandler;
  /** Largest multipart body (`server.maxUploadBytes`). */
  maxUploadBytes: number;
  /** How long a multipart body may take, in all and silent (`server.bodyTimeoutSec`, `bodyIdleSec`). */
  bodyTiming: BodyTiming;
  tasks: ImageTasks;
  publicBaseUrl?: string;
  pollIntervalSec: number;
}

/** Text fields an edit form may have: the task's, with room for SDKs' extras to be refused by name. */
const MAX_FORM_FIELDS = 32;
/** One text field: a 32000-character prompt in any script fits. */
const MAX_FIELD_BYTES = 256 * 1024;

/** Runs a body parser as a step of a handler. */
function runParser(parser: RequestHandler, req: Request, res: Response): Promise<void> {
  return new Promise((resolve, reject) => {
    parser(req, res, (err?: unknown) => (err ? reject(err) : resolve()));
  });
}

/**
 * The task API: `POST /v1/images/tasks` and `/v1/images/edits/tasks` (both
 * taking `Prefer: wait=N`), `GET /v1/images/tasks` (the caller's list),
 * `GET /v1/images/tasks/{id}` (with `?wait=N`), `GET /v1/images/tasks/{id}/events`
 * (the task's event stream), `POST /v1/images/tasks/{id}/cancel`. A submission
 * with `Accept: text/event-stream` is answered with the new task's event stream.
 */
export function createTasksRouter(deps: TasksRouterDeps): Router {
  const router = Router();
  const { service, images } = deps.tasks;
  const view = (req: Request, record: TaskRecord, data: PresentDeps["data"] = "full") =>
    presentTask(record, { images, baseUrl: publicBaseUrl(req, deps.publicBaseUrl), data });
  const pollHeaders = (record: TaskRecord) => headersOf(record, deps.pollIntervalSec);
  // The same answers the task lane gives (see create-task-lane.ts).
  const answers = createTaskAnswers({ tasks: deps.tasks, pollIntervalSec: deps.pollIntervalSec });
  const baseUrlOf = (req: Request) => () => publicBaseUrl(req, deps.publicBaseUrl);
  const answerSubmission = (req: Request, res: Response, submission: Submission) =>
    wantsEventStream(req)
      ? submitAndWatch(deps.tasks, req, res, getPrincipal(res), submission, baseUrlOf(req)())
      : answers.submission(req, res, getPrincipal(res), submission, baseUrlOf(req));

  // Plain submissions are answered by the task lane beside Express; this route
  // answers the rest alike (a path only Express matches: other casing, a trailing `/`).
  router.post("/v1/images/tasks", deps.jsonBody, async (req, res) => {
    await answerSubmission(req, res, { request: parseBody(submitTaskSchema, req.body) });
  });

  router.post("/v1/images/edits/tasks", async (req, res) => {
    let submission: Submission;
    if (isMultipart(req)) {
      const form = await readMultipartForm(req as IncomingMessage, {
        maxBytes: deps.maxUploadBytes,
        fileFields: EDIT_FILE_FIELDS,
        maxFiles: MAX_EDIT_IMAGES + 1,
        maxFields: MAX_FORM_FIELDS,
        maxFieldBytes: MAX_FIELD_BYTES,
        ...deps.bodyTiming,
      });
      submission = editFromForm(form);
    } else {
      await runParser(deps.uploadJsonBody, req, res);
      submission = editFromJson(req.body);
    }
    await answerSubmission(req, res, submission);
  });

  router.get("/v1/images/tasks", async (req, res) => {
    const query = parseListQuery(req.query);
    const page = await service.list(getPrincipal(res), query);
    // No b64_json in a list: a page of 100 tasks of 10 images would be gigabytes.
    const data = await Promise.all(page.records.map((record) => view(req, record, "listed")));
    res.set("Cache-Control", "no-store").json({
      object: "list",
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: page.hasMore,
    });
  });

  // Plain polls are answered by the task lane beside Express; this route
  // answers the rest alike (HEAD, conditional requests, escaped or oddly cased paths).
  router.get("/v1/images/tasks/:taskId", async (req, res) => {
    await answers.poll(res, getPrincipal(res), req.params.taskId, req.query, baseUrlOf(req));
  });

  router.get("/v1/images/tasks/:taskId/events", async (req, res) => {
    const principal = getPrincipal(res);
    await deps.tasks.eventStreams.watch(req, res, principal, req.params.taskId, baseUrlOf(req)());
  });

  router.post("/v1/images/tasks/:taskId/cancel", async (req, res) => {
    const record = await service.cancel(getPrincipal(res), req.params.taskId);
    res.set(pollHeaders(record));
    await sendTaskView(res, 200, await view(req, record));
  });

  return router;
}
