import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseQuery } from "node:querystring";
import type { Request } from "express";
import type { Logger } from "pino";
import { authenticateHeader, type Authenticate } from "../../auth/create-authenticator.js";
import { sendError } from "../../http/send-error.js";
import { readJsonBody, type JsonBodyOptions } from "../../http/json-body.js";
import { parseBody } from "../../http/parse-body.js";
import { publicBaseUrl } from "../../http/public-base-url.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import { observeHttpRequest } from "../../metrics/create-metrics-router.js";
import type { ImageTasks } from "../create-image-tasks.js";
import { submitAndWatch, wantsEventStream } from "../events/submit-and-watch.js";
import { createTaskAnswers } from "./task-answers.js";
import { submitTaskSchema } from "../task-schemas.js";

/** Dependencies of {@link createTaskLane}. */
export interface TaskLaneDeps {
  authenticate: Authenticate;
  tasks: ImageTasks;
  pollIntervalSec: number;
  /** The limits of a submission's JSON body, as the router's `jsonBody` has them. */
  jsonBody: JsonBodyOptions;
  metrics: Metrics;
  logger: Logger;
  /** `server.publicBaseUrl`: when set, the origin of image URLs and `Location`. */
  publicBaseUrl?: string;
  /**
   * The prototype Express gives its requests (`app.request`): the origin of
   * image URLs is then read by the very code the router uses (`trust proxy`,
   * `X-Forwarded-*`, the Host checks).
   */
  expressRequest: object;
}

/** Route templates as the router reports them, kept alike in metrics. */
const POLL_TEMPLATE = "/v1/images/tasks/:taskId";
const SUBMIT_TEMPLATE = "/v1/images/tasks";
const POLL_PATH = /^\/v1\/images\/tasks\/([A-Za-z0-9_-]+)$/;
const EVENTS_TEMPLATE = "/v1/images/tasks/:taskId/events";
const EVENTS_PATH = /^\/v1\/images\/tasks\/([A-Za-z0-9_-]+)\/events$/;

/**
 * The task API's frequent and long-lived requests beside Express, as the
 * proxy lane serves the passthrough: `GET /v1/images/tasks/{id}` (with
 * `?wait=N`), `GET /v1/images/tasks/{id}/events` and `POST /v1/images/tasks`. Express's per-request work (prototype swaps, the
 * router's walk over every layer) cost a poll more than the rest of it. Same
 * steps as the router's routes (metrics, bearer auth before the body is read,
 * the same body limits and schema) and the same code answering (see
 * `task-answers.ts`); every failure goes through {@link sendError}.
 *
 * Returns false for anything else, which then goes to Express: other routes,
 * `HEAD`, and paths only Express's matching reads alike (escapes, other
 * casing, a trailing `/`), answered there by the same code.
 */
export function createTaskLane(
  deps: TaskLaneDeps,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { logger } = deps;
  const answers = createTaskAnswers({ tasks: deps.tasks, pollIntervalSec: deps.pollIntervalSec });
  const baseUrlOf = (req: IncomingMessage) => (): string => {
    if (deps.publicBaseUrl) return publicBaseUrl(req as Request, deps.publicBaseUrl);
    const view = Object.create(deps.expressRequest, {
      headers: { value: req.headers },
      rawHeaders: { value: req.rawHeaders },
      socket: { value: req.socket },
    }) as Request;
    return publicBaseUrl(view, undefined);
  };

  async function poll(req: IncomingMessage, res: ServerResponse, id: string, query: string) {
    const principal = await authenticateHeader(deps.authenticate, req.headers.authorization);
    // Express's default ("simple") query parser is node:querystring: the same values here.
    await answers.poll(res, principal, id, query === "" ? {} : parseQuery(query), baseUrlOf(req));
  }

  /** An event stream lives for minutes: Express's objects would be held with it, per stream. */
  async function events(req: IncomingMessage, res: ServerResponse, id: string) {
    const principal = await authenticateHeader(deps.authenticate, req.headers.authorization);
    await deps.tasks.eventStreams.watch(req, res, principal, id, baseUrlOf(req)());
  }

  async function submit(req: IncomingMessage, res: ServerResponse) {
    const principal = await authenticateHeader(deps.authenticate, req.headers.authorization);
    const parsed = await readJsonBody(req, deps.jsonBody);
    const request = parseBody(submitTaskSchema, parsed?.value);
    if (wantsEventStream(req)) {
      await submitAndWatch(deps.tasks, req, res, principal, { request }, baseUrlOf(req)());
      return;
    }
    await answers.submission(req, res, principal, { request }, baseUrlOf(req));
  }

  return (req, res) => {
    const { url, method } = req;
    if (!url?.startsWith("/v1/images/tasks")) return false;
    const mark = url.indexOf("?");
    const path = mark === -1 ? url : url.slice(0, mark);
    const fail = (err: unknown) => sendError(req, res, err, logger);
    if (method === "POST" && path === SUBMIT_TEMPLATE) {
      observeHttpRequest(deps.metrics, req, res, () => SUBMIT_TEMPLATE);
      submit(req, res).catch(fail);
      return true;
    }
    if (method !== "GET") return false;
    const stream = EVENTS_PATH.exec(path);
    if (stream) {
      observeHttpRequest(deps.metrics, req, res, () => EVENTS_TEMPLATE);
      events(req, res, stream[1] as string).catch(fail);
      return true;
    }
    const match = POLL_PATH.exec(path);
    if (!match) return false;
    observeHttpRequest(deps.metrics, req, res, () => POLL_TEMPLATE);
    poll(req, res, match[1] as string, mark === -1 ? "" : url.slice(mark + 1)).catch(fail);
    return true;
  };
}
