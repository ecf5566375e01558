import { parse as parseQuery } from "node:querystring";
import type { Logger } from "pino";
import { ServiceError } from "../../errors/service-error.js";
import { callerOf, type Lane, type LaneCall } from "../../http/lane.js";
import { publicBaseUrl, type PublicOrigin } from "../../http/public-base-url.js";
import { createRouteTable, decodeSegment } from "../../http/route-table.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { ImageReads } from "../images/image-reads.js";
import type { TaskService } from "../service/task-service.js";
import { presentTask } from "../view/present-task.js";
import { TaskAnswers, type TaskBodyLimits, type TaskRequest } from "./task-answers.js";
import type { StreamLimits } from "./stream-slots.js";
import { createTaskEventStreams } from "./task-event-streams.js";
import { TASK_ROUTES, type TaskRouteName } from "./task-routes.js";

/** What of the task feature the routes use. */
export interface TaskApi {
  service: TaskService;
  images: ImageReads;
}

/** Dependencies of {@link createTaskLane}. */
export interface TaskLaneDeps {
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
 * The task API's lane: every route of `TASK_ROUTES`, behind bearer auth. A
 * request reaches its handler with its caller, its decoded `:taskId`, its
 * query (as `node:querystring` reads it) and the origin of the URLs it hands
 * out; event streams hold only their own small state for minutes.
 */
export function createTaskLane(deps: TaskLaneDeps): Lane {
  const { tasks, logger } = deps;
  const eventStreams = createTaskEventStreams({
    watch: tasks.service.watch,
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
  const table = createRouteTable(TASK_ROUTES);

  return {
    match(method, path) {
      // Cheap for every other request: the task routes all start so.
      if (path.slice(0, 11).toLowerCase() !== "/v1/images/") return undefined;
      const hit = table(method, path);
      if (!hit) return undefined;
      return {
        template: hit.route.template,
        auth: true,
        serve: (call) => HANDLERS[hit.route.name](answers, taskRequest(call, hit.params, deps)),
      };
    },
  };
}

/** A call to a task route as its handler reads it. */
function taskRequest(call: LaneCall, params: readonly string[], deps: TaskLaneDeps): TaskRequest {
  const { req, res, context, query } = call;
  const raw = params[0];
  const taskId = raw === undefined ? "" : decodeSegment(raw);
  if (taskId === undefined)
    throw new ServiceError("invalid_value", "The request could not be read.");
  return {
    req,
    res,
    principal: callerOf(call),
    taskId,
    query: query === "" ? {} : parseQuery(query),
    baseUrlOf: () => publicBaseUrl(req, deps.origin),
    context,
  };
}
