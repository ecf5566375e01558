import { Router, type Request, type RequestHandler } from "express";
import { getPrincipal } from "../auth/principal.js";
import { AppError } from "../http/app-error.js";
import { parseBody } from "../http/parse-body.js";
import { publicBaseUrl } from "../http/public-base-url.js";
import { presentTask } from "./present-task.js";
import { isFinished, type TaskRecord } from "./task-record.js";
import { submitTaskSchema } from "./task-schemas.js";
import type { ImageTasks } from "./create-image-tasks.js";

/** Dependencies of {@link createTasksRouter}. */
export interface TasksRouterDeps {
  /** Parses the JSON body of the POST routes. */
  jsonBody: RequestHandler;
  tasks: ImageTasks;
  publicBaseUrl?: string;
  pollIntervalSec: number;
}

/** `POST /v1/images/tasks`, `GET /v1/images/tasks/{id}`, `POST /v1/images/tasks/{id}/cancel`. */
export function createTasksRouter(deps: TasksRouterDeps): Router {
  const router = Router();
  const { service, signer, images } = deps.tasks;
  const view = (req: Request, record: TaskRecord, withData = true) =>
    presentTask(record, {
      imageBytes: images.bytes,
      signer,
      baseUrl: publicBaseUrl(req, deps.publicBaseUrl),
      withData,
    });
  const pollHeaders = (record: TaskRecord): Record<string, string> => ({
    "Cache-Control": "no-store",
    ...(isFinished(record.status) ? {} : { "Retry-After": String(deps.pollIntervalSec) }),
  });

  router.post("/v1/images/tasks", deps.jsonBody, async (req, res) => {
    const principal = getPrincipal(res);
    const request = parseBody(submitTaskSchema, req.body);
    const idempotencyKey = req.get("idempotency-key");
    if (
      idempotencyKey !== undefined &&
      (idempotencyKey.length === 0 || idempotencyKey.length > 255)
    ) {
      throw new AppError("invalid_value", "Idempotency-Key must be 1 to 255 characters.", {
        param: "Idempotency-Key",
      });
    }
    const { record, replayed } = await service.submit(principal, request, idempotencyKey);
    res
      .status(202)
      .set(pollHeaders(record))
      .set("Location", `${publicBaseUrl(req, deps.publicBaseUrl)}/v1/images/tasks/${record.id}`)
      .set(replayed ? { "Idempotent-Replayed": "true" } : {})
      .json(await view(req, record, replayed));
  });

  router.get("/v1/images/tasks/:taskId", async (req, res) => {
    const record = await service.get(getPrincipal(res), req.params.taskId);
    res.set(pollHeaders(record)).json(await view(req, record));
  });

  router.post("/v1/images/tasks/:taskId/cancel", async (req, res) => {
    const record = await service.cancel(getPrincipal(res), req.params.taskId);
    res.set(pollHeaders(record)).json(await view(req, record));
  });

  return router;
}
