import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseQuery } from "node:querystring";
import type { Logger } from "pino";
import { authenticateHeader, type Authenticate } from "../../auth/create-authenticator.js";
import { ServiceError } from "../../errors/service-error.js";
import { publicBaseUrl, type PublicOrigin } from "../../http/public-base-url.js";
import { sendError } from "../../http/send-error.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import { noteCaller, type RequestContext } from "../../observability/request-context.js";
import type { TaskFeed } from "../events/task-feed.js";
import type { ImageReads } from "../images/image-reads.js";
import type { TaskService } from "../service/task-service.js";
import { presentTask } from "../view/present-task.js";
import { TaskAnswers, type TaskBodyLimits, type TaskRequest } from "./task-answers.js";
import type { StreamLimits } from "./stream-slots.js";
import { createTaskEventStreams } from "./task-event-streams.js";
import { matchTaskRoute, type TaskRouteName } from "./task-routes.js";

/** What of the task feature the routes use. */
export interface TaskApi {
  service: TaskService;
  images: ImageReads;
  /** Every task's events this process hears, for event streams. */
  feed: TaskFeed;
}

/** Dependencies of {@link createTaskLane}. */
export interface TaskLaneDeps {
  authenticate: Authenticate;
  tasks: TaskApi;
  limits: TaskBodyLimits;
  /** `imageTasks.pollIntervalSec`. */
  pollIntervalSec: number;
  /** A comment line this often keeps idle event streams open (`imageTasks.eventsKeepAliveSec`). */
  eventsKeepAliveMs: number;
  /** The `events` section: streams open at once, and how long one waits on a client that does not read. */
  events: StreamLimits & { slowReaderSec: number };
  /** Where the origin of image URLs and `Location` comes from. */
  origin: PublicOrigin;
  metrics: Metrics;
  logger: Logger;
}

/** The route names' handlers. */
const HANDLERS: Record<TaskRouteName, (answers: TaskAnswers, r: TaskRequest) => Promise<void>> = {
  submit: (answers, r) => answers.submit(r),
  submit_edit: (answers, r) => answers.submitEdit(r),
  list: (answers, r) => answers.list(r),
  get: (answers, r) => answers.get(r),
  events: (answers, r) => answers.events(r),
  cancel: (answers, r) => answers.cancel(r),
};

/**
 * Serves every route of the task API (`TASK_ROUTES`), beside Express as the
 * proxy lane serves the passthrough: Express's per-request work (prototype
 * swaps, the router's walk over every layer) cost a poll more than the rest
 * of it, and event streams would hold Express's objects for minutes. Each
 * request: metrics by route template, bearer auth before any byte of the body
 * is read, then the route's answer; every failure goes through
 * {@link sendError}.
 *
 * Returns false for anything else (other paths and methods), which Express
 * then answers (404 `not_found` behind auth).
 */
export function createTaskLane(
  deps: TaskLaneDeps,
): (req: IncomingMessage, res: ServerResponse, context: RequestContext) => boolean {
  const { tasks, logger } = deps;
  const eventStreams = createTaskEventStreams({
    feed: tasks.feed,
    read: tasks.service.get,
    present: (record, baseUrl) =>
      presentTask(record, { images: tasks.images, baseUrl, data: "full" }),
    keepAliveMs: deps.eventsKeepAliveMs,
    limits: deps.events,
    slowReaderMs: deps.events.slowReaderSec * 1000,
    metrics: deps.metrics,
    logger,
  });
  const answers = new TaskAnswers({
    service: tasks.service,
    images: tasks.images,
    eventStreams,
    limits: deps.limits,
    pollIntervalSec: deps.pollIntervalSec,
  });

  async function serve(
    req: IncomingMessage,
    res: ServerResponse,
    name: TaskRouteName,
    rawTaskId: string | undefined,
    query: string,
    context: RequestContext,
  ): Promise<void> {
    const principal = await authenticateHeader(deps.authenticate, req.headers.authorization, req);
    noteCaller(res, principal);
    await HANDLERS[name](answers, {
      req,
      res,
      principal,
      taskId: rawTaskId === undefined ? "" : decodeSegment(rawTaskId),
      // The query as Express's default ("simple") parser reads it: node:querystring.
      query: query === "" ? {} : parseQuery(query),
      baseUrlOf: () => publicBaseUrl(req, deps.origin),
      context,
    });
  }

  return (req, res, context) => {
    const { url, method } = req;
    // Cheap for every other request: the task routes all start so.
    if (!url || !method || url.slice(0, 11).toLowerCase() !== "/v1/images/") return false;
    const mark = url.indexOf("?");
    const match = matchTaskRoute(method, mark === -1 ? url : url.slice(0, mark));
    if (!match) return false;
    context.route = match.route.template;
    const query = mark === -1 ? "" : url.slice(mark + 1);
    serve(req, res, match.route.name, match.rawTaskId, query, context).catch((err: unknown) =>
      sendError(req, res, err, logger),
    );
    return true;
  };
}

/** A path segment, percent-decoded; a broken escape is the client's error. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ServiceError("invalid_value", "The request could not be read.");
  }
}
