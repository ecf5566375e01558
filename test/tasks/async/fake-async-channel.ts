import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { readRaw, sendJson } from "../../support/fake-http.js";
import { parseForm } from "../../support/fake-multipart.js";

/** A 1x1 PNG: what every finished job holds. */
export const JOB_PNG_B64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

export type Dialect = "sub2api" | "bifrost" | "openai-background";

/** How the fake's jobs end. */
export interface JobBehaviour {
  /** A job finishes this long after its submission (ms); `never`: it runs for ever. */
  finishAfterMs: number | "never";
  /** A job ends failed with this error instead (its message may hold the bearer key: `{key}`). */
  fail?: { code: string; message: string; status?: number };
  /** Submissions answer this status (an error envelope) instead of a job. */
  submitStatus?: number;
  /** The first polls of each job answer these statuses (500, 404, ...) before its state. */
  pollStatuses?: number[];
  /** `Retry-After` (seconds) on every poll answer. */
  retryAfterSec?: number;
  /** The status a running job shows (default: the dialect's own). */
  runningStatus?: string;
}

/** One job the fake made. */
export interface FakeJob {
  id: string;
  dialect: Dialect;
  prompt: string;
  /** The submission's body (JSON, or an edit's form fields). */
  body: Record<string, unknown>;
  submittedAt: number;
  /** `Date.now()` of each poll. */
  polls: number[];
  cancelled: boolean;
  /** Set by {@link FakeAsyncChannel.finish}. */
  finishedByTest: boolean;
  /** Authorization of every request about it. */
  authorizations: string[];
  /** The `traceparent` of every request about it that had one. */
  traceparents: string[];
}

/** A fake channel speaking sub2api's, Bifrost's and OpenAI's background async APIs. */
export interface FakeAsyncChannel {
  /** `http://127.0.0.1:PORT/v1` */
  baseUrl: string;
  jobs: FakeJob[];
  /** Submissions seen (refused ones included), by dialect. */
  submissions: Record<Dialect, number>;
  cancels: string[];
  behave(behaviour: Partial<JobBehaviour>): void;
  /** Ends a running job now (completed). */
  finish(id: string): void;
  /**
   * Holds the answers to submissions (the job is made, counted and listed
   * when it is answered) until the call it resolves is made: a test acts
   * while a run waits for its channel.
   */
  holdSubmissions(): () => void;
  reset(): void;
  close(): Promise<void>;
}

const DEFAULTS: JobBehaviour = { finishAfterMs: 300 };

/** Starts the fake on a free port of 127.0.0.1. */
export async function startFakeAsyncChannel(): Promise<FakeAsyncChannel> {
  let behaviour: JobBehaviour = { ...DEFAULTS };
  const jobs: FakeJob[] = [];
  const submissions: Record<Dialect, number> = { sub2api: 0, bifrost: 0, "openai-background": 0 };
  const cancels: string[] = [];
  const byId = new Map<string, FakeJob>();
  let held: Promise<void> | undefined;

  const stateOf = (job: FakeJob): "running" | "completed" | "failed" | "cancelled" => {
    if (job.cancelled) return "cancelled";
    const done =
      job.finishedByTest ||
      (behaviour.finishAfterMs !== "never" &&
        Date.now() - job.submittedAt >= behaviour.finishAfterMs);
    if (!done) return "running";
    return behaviour.fail ? "failed" : "completed";
  };

  const submit = async (req: IncomingMessage, res: ServerResponse, dialect: Dialect) => {
    const raw = await readRaw(req);
    const contentType = String(req.headers["content-type"] ?? "");
    const body = contentType.startsWith("multipart/form-data")
      ? (parseForm(contentType, raw)?.fields ?? {})
      : (JSON.parse(raw.toString("utf8")) as Record<string, unknown>);
    submissions[dialect] += 1;
    await held;
    if (behaviour.submitStatus) {
      sendJson(res, behaviour.submitStatus, {
        error: { message: "refused", type: "server_error", code: "refused" },
      });
      return;
    }
    const prefix =
      dialect === "openai-background" ? "resp_" : dialect === "sub2api" ? "imgtask_" : "";
    const job: FakeJob = {
      id: `${prefix}${randomBytes(12).toString("hex")}`,
      dialect,
      prompt: String(body.prompt ?? body.input ?? ""),
      body,
      submittedAt: Date.now(),
      polls: [],
      cancelled: false,
      finishedByTest: false,
      authorizations: [String(req.headers.authorization ?? "")],
      traceparents: req.headers.traceparent ? [String(req.headers.traceparent)] : [],
    };
    jobs.push(job);
    byId.set(job.id, job);
    answerJob(res, job, true);
  };

  /** A job as its dialect shows it; a submission's answer shows it just made. */
  const answerJob = (res: ServerResponse, job: FakeJob, submission = false) => {
    const state = submission ? "running" : stateOf(job);
    const key = job.authorizations[0]?.replace(/^Bearer /, "") ?? "";
    const failure = behaviour.fail && {
      ...behaviour.fail,
      message: behaviour.fail.message.replace("{key}", key),
    };
    const result = {
      created: Math.floor(job.submittedAt / 1000),
      data: [{ b64_json: JOB_PNG_B64 }],
      usage: { input_tokens: 10, output_tokens: 20, total_tokens: 30 },
    };
    if (behaviour.retryAfterSec !== undefined && !submission) {
      res.setHeader("retry-after", String(behaviour.retryAfterSec));
    }
    if (job.dialect === "sub2api") {
      const status = {
        running: behaviour.runningStatus ?? "processing",
        completed: "completed",
        failed: "failed",
        cancelled: "failed",
      }[state];
      sendJson(res, submission ? 202 : 200, {
        id: job.id,
        task_id: job.id,
        object: "image.generation.task",
        status,
        ...(state === "completed" ? { result, http_status: 200 } : {}),
        ...(state === "failed" && failure
          ? { error: failure, http_status: failure.status ?? 400 }
          : {}),
      });
      return;
    }
    if (job.dialect === "bifrost") {
      const running = state === "running";
      sendJson(res, running ? 202 : 200, {
        id: job.id,
        status: running ? (behaviour.runningStatus ?? "processing") : state,
        ...(state === "completed" ? { result } : {}),
        ...(state === "failed" && failure
          ? { error: { message: failure.message, type: failure.code } }
          : {}),
      });
      return;
    }
    const status = state === "running" ? (behaviour.runningStatus ?? "in_progress") : state;
    sendJson(res, 200, {
      id: job.id,
      object: "response",
      status: submission ? "queued" : status,
      background: true,
      output:
        state === "completed"
          ? [
              {
                id: `ig_${job.id}`,
                type: "image_generation_call",
                status: "completed",
                result: JOB_PNG_B64,
              },
            ]
          : [],
      ...(state === "failed" && failure
        ? { error: { code: failure.code, message: failure.message } }
        : { error: null }),
      usage: state === "completed" ? { input_tokens: 5, output_tokens: 7, total_tokens: 12 } : null,
    });
  };

  const poll = (req: IncomingMessage, res: ServerResponse, id: string, cancel = false) => {
    req.resume();
    const job = byId.get(id);
    if (!job) {
      sendJson(res, 404, {
        error: { message: "no such job", type: "invalid_request_error", code: "not_found" },
      });
      return;
    }
    job.authorizations.push(String(req.headers.authorization ?? ""));
    if (req.headers.traceparent) job.traceparents.push(String(req.headers.traceparent));
    if (cancel) {
      cancels.push(id);
      if (stateOf(job) === "running") job.cancelled = true;
      answerJob(res, job);
      return;
    }
    job.polls.push(Date.now());
    const scripted = behaviour.pollStatuses?.[job.polls.length - 1];
    if (scripted) {
      sendJson(res, scripted, {
        error: { message: `scripted ${scripted}`, type: "server_error", code: null },
      });
      return;
    }
    answerJob(res, job);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const method = req.method ?? "GET";
    const path = new URL(req.url ?? "/", "http://fake.invalid").pathname;
    let match: RegExpExecArray | null;
    if (method === "GET" && path === "/v1/models") {
      req.resume();
      sendJson(res, 200, { object: "list", data: [{ id: "gpt-image-1", object: "model" }] });
    } else if (method === "POST" && /^\/v1\/images\/(generations|edits)\/async$/.test(path)) {
      await submit(req, res, "sub2api");
    } else if (method === "GET" && (match = /^\/v1\/images\/tasks\/([^/]+)$/.exec(path))) {
      poll(req, res, decodeURIComponent(match[1]!));
    } else if (method === "POST" && /^\/v1\/async\/images\/(generations|edits)$/.test(path)) {
      await submit(req, res, "bifrost");
    } else if (
      method === "GET" &&
      (match = /^\/v1\/async\/images\/(?:generations|edits)\/([^/]+)$/.exec(path))
    ) {
      poll(req, res, decodeURIComponent(match[1]!));
    } else if (method === "POST" && path === "/v1/responses") {
      await submit(req, res, "openai-background");
    } else if (method === "GET" && (match = /^\/v1\/responses\/([^/]+)$/.exec(path))) {
      poll(req, res, decodeURIComponent(match[1]!));
    } else if (method === "POST" && (match = /^\/v1\/responses\/([^/]+)\/cancel$/.exec(path))) {
      poll(req, res, decodeURIComponent(match[1]!), true);
    } else {
      req.resume();
      sendJson(res, 404, {
        error: {
          message: `Unknown route ${method} ${path}`,
          type: "invalid_request_error",
          code: "not_found",
        },
      });
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    jobs,
    submissions,
    cancels,
    behave(next) {
      behaviour = { ...behaviour, ...next };
    },
    finish(id) {
      const job = byId.get(id);
      if (job) job.finishedByTest = true;
    },
    holdSubmissions() {
      let release = () => {};
      held = new Promise<void>((resolve) => (release = resolve));
      return () => {
        held = undefined;
        release();
      };
    },
    reset() {
      behaviour = { ...DEFAULTS };
      jobs.length = 0;
      byId.clear();
      cancels.length = 0;
      for (const dialect of Object.keys(submissions) as Dialect[]) submissions[dialect] = 0;
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
