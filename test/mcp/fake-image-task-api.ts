import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import express from "express";

/** A 1x1 PNG. */
export const TINY_PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

/** What the fake does for a task, set per test. */
export interface FakeTaskPlan {
  /** GETs answered "queued"/"in_progress" before the task finishes. */
  pendingPolls: number;
  outcome:
    | { kind: "completed"; n?: number; url?: (id: string, index: number) => string }
    | { kind: "b64"; n?: number; image?: Buffer }
    /** A completed task whose JSON never ends: one b64_json that grows until the client leaves. */
    | { kind: "endless" }
    | { kind: "failed"; code: string; message: string };
  contentType?: string;
  body?: Buffer;
  /**
   * Answers (the submission's, the polls', the image downloads) written whole but never ended,
   * as a proxy or CDN that never sends the last chunk.
   */
  holdOpen?: boolean;
}

interface FakeTask {
  id: string;
  model: string;
  created: number;
  polls: number;
  plan: FakeTaskPlan;
  cancelled: boolean;
}

/**
 * A stand-in for the service's image-task API (the routes `src/mcp` calls), to test the tools'
 * logic without the real service: fixed plans, request counters, injectable failures.
 */
export async function startFakeImageTaskApi(options: { key?: string } = {}) {
  const key = options.key ?? "sk-test";
  const tasks = new Map<string, FakeTask>();
  const counts = { submit: 0, get: 0, cancel: 0, download: 0 };
  const downloadAuth: Array<string | undefined> = [];
  let nextPlan: FakeTaskPlan = { pendingPolls: 1, outcome: { kind: "completed" } };
  let submitFailure: { status: number; code: string; retryAfter?: string } | undefined;
  let seq = 0;
  let origin = "";

  const app = express();
  app.use(express.json());
  const fail = (res: express.Response, status: number, code: string, message: string) =>
    res
      .status(status)
      .json({ error: { message, type: "invalid_request_error", param: null, code } });
  const authed = (req: express.Request, res: express.Response) => {
    const auth = req.headers.authorization;
    if (!auth)
      return (void fail(res, 401, "missing_api_key", "You didn't provide an API key."), false);
    if (auth !== `Bearer ${key}`)
      return (void fail(res, 401, "invalid_api_key", "Incorrect API key provided."), false);
    return true;
  };
  /** A JSON answer, held open after it when the task's plan says so. */
  const send = (res: express.Response, task: FakeTask, body: unknown) => {
    if (!task.plan.holdOpen) return void res.json(body);
    res.type("application/json").write(JSON.stringify(body));
  };
  const view = (task: FakeTask) => {
    const base = { id: task.id, object: "image.task", created: task.created, model: task.model };
    if (task.cancelled) {
      return {
        ...base,
        status: "failed",
        error: { code: "cancelled", message: "Cancelled.", type: "task_error" },
      };
    }
    if (task.polls <= task.plan.pendingPolls) {
      return { ...base, status: task.polls <= 1 ? "queued" : "in_progress" };
    }
    const outcome = task.plan.outcome;
    if (outcome.kind === "failed") {
      return {
        ...base,
        status: "failed",
        error: { code: outcome.code, message: outcome.message, type: "image_generation_error" },
      };
    }
    if (outcome.kind === "endless") return { ...base, status: "completed", endless: true };
    const n = outcome.n ?? 1;
    const data = Array.from({ length: n }, (_, i) =>
      outcome.kind === "b64"
        ? { b64_json: (outcome.image ?? TINY_PNG).toString("base64") }
        : {
            url:
              outcome.url?.(task.id, i) ??
              `${origin}/v1/images/files/${task.id}/${i}.png?expires=9999999999&signature=abc`,
          },
    );
    return {
      ...base,
      status: "completed",
      completed_at: task.created + 1,
      expires_at: 4102444800,
      data,
    };
  };

  app.post("/v1/images/tasks", (req, res) => {
    counts.submit++;
    if (!authed(req, res)) return;
    if (submitFailure) {
      if (submitFailure.retryAfter) res.set("Retry-After", submitFailure.retryAfter);
      return void fail(
        res,
        submitFailure.status,
        submitFailure.code,
        `Failure ${submitFailure.code}.`,
      );
    }
    const body = req.body as { model?: string; response_format?: string };
    const id = `task_fake${++seq}x${Math.random().toString(36).slice(2, 10)}`.padEnd(27, "0");
    const task: FakeTask = {
      id,
      model: body.model ?? "?",
      created: 1700000000,
      polls: 0,
      plan: nextPlan,
      cancelled: false,
    };
    tasks.set(id, task);
    res.status(202).location(`/v1/images/tasks/${id}`);
    send(res, task, { ...view(task), status: "queued", lastBody: body });
  });
  app.get("/v1/images/tasks/:id", (req, res) => {
    counts.get++;
    if (!authed(req, res)) return;
    const task = tasks.get(req.params.id);
    if (!task) return void fail(res, 404, "task_not_found", `No task ${req.params.id}.`);
    task.polls++;
    const body = view(task);
    if (body.status === "queued" || body.status === "in_progress") res.set("Retry-After", "1");
    if ("endless" in body) {
      res.status(200).type("application/json");
      res.write(
        `{"id":"${task.id}","object":"image.task","status":"completed","data":[{"b64_json":"`,
      );
      const chunk = Buffer.alloc(256 * 1024, "A");
      const pump = () => {
        while (!res.destroyed) if (!res.write(chunk)) return void res.once("drain", pump);
      };
      pump();
      return;
    }
    send(res.set("Cache-Control", "no-store"), task, body);
  });
  app.post("/v1/images/tasks/:id/cancel", (req, res) => {
    counts.cancel++;
    if (!authed(req, res)) return;
    const task = tasks.get(req.params.id);
    if (!task) return void fail(res, 404, "task_not_found", `No task ${req.params.id}.`);
    const current = view(task);
    if (current.status === "queued" || current.status === "in_progress") task.cancelled = true;
    res.json(view(task));
  });
  app.get("/v1/images/files/:id/:file", (req, res) => {
    counts.download++;
    downloadAuth.push(req.headers.authorization);
    const task = tasks.get(req.params.id);
    if (!task) return void fail(res, 404, "not_found", "Not found.");
    const image = task.plan.body ?? TINY_PNG;
    res.type(task.plan.contentType ?? "image/png");
    if (task.plan.holdOpen) res.write(image);
    else res.send(image);
  });

  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    origin,
    baseURL: `${origin}/v1`,
    key,
    counts,
    downloadAuth,
    tasks,
    /** Plan for the tasks submitted from now on. */
    plan(plan: FakeTaskPlan) {
      nextPlan = plan;
    },
    failSubmissions(failure: { status: number; code: string; retryAfter?: string } | undefined) {
      submitFailure = failure;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type FakeImageTaskApi = Awaited<ReturnType<typeof startFakeImageTaskApi>>;
