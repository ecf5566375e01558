import type { IncomingMessage } from "node:http";
import { ServiceError } from "../../errors/service-error.js";
import { clientGone } from "../../http/client-gone.js";
import type { Lane } from "../../http/lane.js";
import { createRouteTable, type RouteDef } from "../../http/route-table.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";
import { showTask } from "../view/show-task.js";
import type { TaskLaneDeps } from "./create-task-lane.js";
import { pollHeaders } from "./poll-headers.js";
import { readEdit, readGeneration } from "./read-submission.js";
import { sendTaskView } from "./send-task-view.js";
import { idempotencyKeyOf } from "./submission-headers.js";
import { parseWaitQuery } from "./task-query.js";
import { setHeaders, taskRequest, type TaskRequest } from "./task-request.js";

type JobKind = "generation" | "edit";

/** Bifrost's async image routes: a submission and a poll per kind of job. */
const ROUTES: ReadonlyArray<RouteDef & { kind: JobKind; poll: boolean }> = [
  { kind: "generation", poll: false, method: "POST", template: "/v1/async/images/generations" },
  { kind: "edit", poll: false, method: "POST", template: "/v1/async/images/edits" },
  {
    kind: "generation",
    poll: true,
    method: "GET",
    template: "/v1/async/images/generations/:jobId",
  },
  { kind: "edit", poll: true, method: "GET", template: "/v1/async/images/edits/:jobId" },
];

const PATH: Record<JobKind, string> = {
  generation: "/v1/async/images/generations",
  edit: "/v1/async/images/edits",
};

/** How long the result is kept after the job ends, in seconds, as Bifrost's clients ask. */
export const RESULT_TTL_HEADER = "x-bf-async-job-result-ttl";

/**
 * Bifrost's async inference dialect for images: `POST
 * /v1/async/images/generations` (and `/edits`) take the synchronous body
 * (`stream: true` refused) and answer `202` with the job, `pending`; `GET
 * .../{id}` answers `202` while it is pending or processing and `200` once it
 * has finished, with the synchronous route's body as `result` or a
 * `BifrostError`. A job is a native task (a `task_` id): the task API's
 * routes answer it natively, these in Bifrost's shape.
 */
export function createBifrostLane(deps: TaskLaneDeps): Lane {
  const table = createRouteTable(ROUTES);
  return {
    match(method, path) {
      if (path.slice(0, 10).toLowerCase() !== "/v1/async/") return undefined;
      const hit = table(method, path);
      if (!hit) return undefined;
      const { kind, poll } = hit.route;
      return {
        template: hit.route.template,
        auth: true,
        serve: (call) => {
          const r = taskRequest(call, hit.params, deps.origin);
          return poll ? pollJob(deps, r, kind) : submitJob(deps, r, kind);
        },
      };
    },
  };
}

/**
 * `x-bf-async-job-result-ttl`: a positive whole number of seconds; anything
 * else is ignored (the default retention applies), as Bifrost ignores it.
 */
export function resultTtlOf(req: IncomingMessage): number | undefined {
  const value = req.headers[RESULT_TTL_HEADER];
  if (typeof value !== "string" || !/^\d{1,15}$/.test(value.trim())) return undefined;
  const seconds = Number(value.trim());
  return seconds > 0 ? seconds : undefined;
}

/** A submission: `202` with the job. */
async function submitJob(deps: TaskLaneDeps, r: TaskRequest, kind: JobKind): Promise<void> {
  const { service, images } = deps.tasks;
  const read = kind === "edit" ? readEdit : readGeneration;
  const submission = await read(r.req, deps.limits, { syncBody: true });
  r.context.model = submission.request.model;
  const baseUrl = r.baseUrlOf();
  const retentionSec = resultTtlOf(r.req);
  const { record, replayed } = await service.submit(r.principal, submission, {
    idempotencyKey: idempotencyKeyOf(r.req),
    baseUrl,
    span: r.context.span,
    dialect: "bifrost",
    ...(retentionSec === undefined ? {} : { retentionSec }),
  });
  const view = await showTask(
    record,
    { images, baseUrl, data: replayed ? "full" : "none", limits: deps.taskLimits },
    "bifrost",
  );
  setHeaders(r.res, pollHeaders(record, deps.pollIntervalSec));
  r.res.setHeader("Location", `${baseUrl}${PATH[kind]}/${record.id}`);
  if (replayed) r.res.setHeader("Idempotent-Replayed", "true");
  await sendTaskView(r.res, 202, view);
}

/**
 * A poll (`?wait=N` as on the task API): `202` while the job is pending or
 * processing, `200` once finished. Only a job of this kind is found here:
 * any other task, or another key's, is the same 404 as an unknown id.
 */
async function pollJob(deps: TaskLaneDeps, r: TaskRequest, kind: JobKind): Promise<void> {
  const { service, images } = deps.tasks;
  const wait = parseWaitQuery(r.query);
  let record = await service.get(r.principal, r.taskId);
  if (!isJob(record, kind)) {
    throw new ServiceError("task_not_found", `No task found with id '${r.taskId.slice(0, 80)}'.`, {
      param: "task_id",
    });
  }
  if (wait > 0 && !isFinished(record.status)) {
    record = await service.waitFor(r.principal, r.taskId, wait * 1000, clientGone(r.res));
  }
  r.context.model = record.model;
  const baseUrl = r.baseUrlOf();
  const view = await showTask(
    record,
    { images, baseUrl, data: "full", limits: deps.taskLimits },
    "bifrost",
  );
  setHeaders(r.res, pollHeaders(record, deps.pollIntervalSec));
  await sendTaskView(r.res, isFinished(record.status) ? 200 : 202, view);
}

/** Whether `record` is a Bifrost job of `kind`. */
function isJob(record: TaskRecord, kind: JobKind): boolean {
  return record.dialect === "bifrost" && (record.kind === "edit" ? "edit" : "generation") === kind;
}
