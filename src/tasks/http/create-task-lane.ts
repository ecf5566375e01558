import type { Logger } from "pino";
import type { Lane } from "../../http/lane.js";
import type { PublicOrigin } from "../../http/public-base-url.js";
import { createRouteTable } from "../../http/route-table.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { ImageReads } from "../images/image-reads.js";
import type { TaskService } from "../service/task-service.js";
import { nativeRouteDialect, showTask } from "../view/show-task.js";
import type { Sub2apiLimits } from "../view/sub2api-view.js";
import { TaskAnswers, type TaskBodyLimits } from "./task-answers.js";
import type { StreamLimits } from "./stream-slots.js";
import { createTaskEventStreams } from "./task-event-streams.js";
import { taskRequest, type TaskRequest } from "./task-request.js";
import { TASK_ROUTES, type TaskRouteName } from "./task-routes.js";

/** What of the task feature the routes use. */
export interface TaskApi {
  service: TaskService;
  images: ImageReads;
}

/** Dependencies of {@link createTaskLane} (and of the dialects' lanes). */
export interface TaskLaneDeps {
  tasks: TaskApi;
  limits: TaskBodyLimits;
  /** `imageTasks.pollIntervalSec`. */
  pollIntervalSec: number;
  /** `imageTasks`' timeout and retention: what a sub2api task's `expires_at` reads. */
  taskLimits: Sub2apiLimits;
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
 * out; event streams hold only their own small state for minutes. A sub2api
 * task is shown in sub2api's dialect here (its clients poll these routes).
 */
export function createTaskLane(deps: TaskLaneDeps): Lane {
  const { tasks, logger, taskLimits } = deps;
  const eventStreams = createTaskEventStreams({
    watch: tasks.service.watch,
    read: tasks.service.get,
    present: (record, baseUrl) =>
      showTask(
        record,
        { images: tasks.images, baseUrl, data: "full", limits: taskLimits },
        nativeRouteDialect(record),
      ),
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
    taskLimits,
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
        serve: (call) =>
          HANDLERS[hit.route.name](answers, taskRequest(call, hit.params, deps.origin)),
      };
    },
  };
}
