import type { Lane } from "../../http/lane.js";
import { createRouteTable, type RouteDef } from "../../http/route-table.js";
import { showTask } from "../view/show-task.js";
import type { TaskLaneDeps } from "./create-task-lane.js";
import { readEdit, readGeneration } from "./read-submission.js";
import { sendTaskView } from "./send-task-view.js";
import { idempotencyKeyOf } from "./submission-headers.js";
import { setHeaders, taskRequest, type TaskRequest } from "./task-request.js";

/** sub2api's submissions; its tasks are then polled on the task API's own routes. */
const ROUTES: ReadonlyArray<RouteDef & { kind: "generation" | "edit" }> = [
  { kind: "generation", method: "POST", template: "/v1/images/generations/async" },
  { kind: "edit", method: "POST", template: "/v1/images/edits/async" },
];

/** The poll interval sub2api tells its clients on submission. */
const SUB2API_RETRY_AFTER = "3";

/**
 * sub2api's async image dialect: `POST /v1/images/generations/async` and
 * `POST /v1/images/edits/async` take the synchronous routes' bodies (an
 * edit's as multipart or JSON; `stream: true` refused) and answer `202` with
 * the task in sub2api's shape, its `imgtask_` id and the poll URL. The task
 * itself is an image task like any other: polled, waited for, watched,
 * listed and cancelled on the task API's routes, which show it in sub2api's
 * shape.
 */
export function createSub2apiLane(deps: TaskLaneDeps): Lane {
  const table = createRouteTable(ROUTES);
  return {
    match(method, path) {
      if (path.slice(0, 11).toLowerCase() !== "/v1/images/") return undefined;
      const hit = table(method, path);
      if (!hit) return undefined;
      return {
        template: hit.route.template,
        auth: true,
        serve: (call) => submit(deps, taskRequest(call, hit.params, deps.origin), hit.route.kind),
      };
    },
  };
}

/** A submission: `202`, `Location` (the poll URL), `Retry-After: 3` and the task. */
async function submit(
  deps: TaskLaneDeps,
  r: TaskRequest,
  kind: "generation" | "edit",
): Promise<void> {
  const { service, images } = deps.tasks;
  const read = kind === "edit" ? readEdit : readGeneration;
  const submission = await read(r.req, deps.limits, { syncBody: true });
  r.context.model = submission.request.model;
  const baseUrl = r.baseUrlOf();
  const { record, replayed } = await service.submit(r.principal, submission, {
    idempotencyKey: idempotencyKeyOf(r.req),
    baseUrl,
    span: r.context.span,
    dialect: "sub2api",
  });
  const view = await showTask(
    record,
    { images, baseUrl, data: replayed ? "full" : "none", limits: deps.taskLimits },
    "sub2api",
  );
  setHeaders(r.res, {
    Location: `${baseUrl}/v1/images/tasks/${record.id}`,
    "Retry-After": SUB2API_RETRY_AFTER,
    "Cache-Control": "no-store",
  });
  if (replayed) r.res.setHeader("Idempotent-Replayed", "true");
  await sendTaskView(r.res, 202, view);
}
