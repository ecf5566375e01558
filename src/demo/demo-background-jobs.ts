import { randomBytes } from "node:crypto";
import { DemoRequestError, type OpenAiErrorBody } from "./demo-http-helpers.js";
import { drawImages, refuseFailPrompt, type DrawRequest } from "./draw-demo-images.js";
import { parseDemoImageSize } from "./draw-demo-image.js";

/** The async APIs the demo's jobs are made through. */
export type DemoJobDialect = "sub2api" | "bifrost" | "openai-background";

/** Where a demo job stands. */
export type DemoJobState = "running" | "completed" | "failed" | "cancelled";

/** A generation the demo runs as a job of its own, answered by polls. */
export interface DemoJob {
  id: string;
  dialect: DemoJobDialect;
  /** Unix seconds. */
  createdAt: number;
  completedAt?: number;
  state: DemoJobState;
  /** What it draws. */
  request: DrawRequest;
  /** Once completed: the synchronous image route's answer (`{created, data, usage, ...}`). */
  result?: Record<string, unknown>;
  /** Once failed: the error the synchronous route would have answered, and its status. */
  error?: Partial<OpenAiErrorBody> & { message: string };
  httpStatus?: number;
  /** What the dialect's answers show besides (a background response's model and tool). */
  extra: Record<string, unknown>;
  /** Roughly what keeping it costs (its result's bytes). */
  bytes: number;
  timer?: NodeJS.Timeout;
}

/** The demo's jobs, in memory, bounded like its stored responses. */
export interface DemoJobs {
  /** Starts a job drawing `request` that finishes `delayMs` from now. */
  start(
    dialect: DemoJobDialect,
    request: DrawRequest,
    delayMs: number,
    extra?: Record<string, unknown>,
  ): DemoJob;
  /**
   * The job `id` names. An id in the demo's form that it no longer holds (made
   * before a restart of the service, whose demo channel lives in its process)
   * becomes a job again, finishing `delayMs` from now with a picture drawn
   * from its id, so a poll resumed after a restart ends as it would have.
   */
  get(id: string, delayMs: number): DemoJob | undefined;
  /** Cancels a running job (a finished one stays as it is). */
  cancel(id: string): DemoJob | undefined;
  /** Drops every job, stopping their timers (the demo channel closes). */
  clear(): void;
}

/** Bounds of {@link createDemoJobs}. */
export interface DemoJobLimits {
  /** Jobs kept at most. Default 1000. */
  maxEntries?: number;
  /** Their results' bytes at most. Default 64 MiB. */
  maxBytes?: number;
}

const PREFIXES: Record<DemoJobDialect, string> = {
  sub2api: "imgtask_",
  bifrost: "job_",
  "openai-background": "resp_",
};

/** An id of the demo's: its dialect's prefix, 96 random bits, `n` and the size it draws. */
const JOB_ID = /^(imgtask_|job_|resp_)[0-9a-f]{24}_(\d{1,2})_(\d{1,4}x\d{1,4})$/;

/** Whether `id` is one of the demo's job ids (of any dialect). */
export function isDemoJobId(id: string): boolean {
  return JOB_ID.test(id);
}

/** Keeps the demo's jobs in memory, oldest dropped first past its bounds. */
export function createDemoJobs(limits: DemoJobLimits = {}): DemoJobs {
  const maxEntries = limits.maxEntries ?? 1000;
  const maxBytes = limits.maxBytes ?? 64 * 1024 * 1024;
  const jobs = new Map<string, DemoJob>();
  let bytes = 0;

  const remove = (id: string) => {
    const job = jobs.get(id);
    if (!job) return;
    clearTimeout(job.timer);
    jobs.delete(id);
    bytes -= job.bytes;
  };
  const add = (job: DemoJob) => {
    jobs.set(job.id, job);
    for (const oldest of jobs.keys()) {
      if (jobs.size <= 1 || (jobs.size <= maxEntries && bytes <= maxBytes)) break;
      remove(oldest);
    }
  };
  const schedule = (job: DemoJob, delayMs: number) => {
    job.timer = setTimeout(() => {
      job.timer = undefined;
      void finish(job).then((grown) => {
        if (!jobs.has(job.id)) return;
        job.bytes += grown;
        bytes += grown;
        add(job);
      });
    }, delayMs);
    job.timer.unref();
  };
  const make = (
    dialect: DemoJobDialect,
    request: DrawRequest,
    delayMs: number,
    extra: Record<string, unknown>,
    id = newJobId(dialect, request),
  ): DemoJob => {
    const job: DemoJob = {
      id,
      dialect,
      createdAt: Math.floor(Date.now() / 1000),
      state: "running",
      request,
      extra,
      bytes: 0,
    };
    add(job);
    schedule(job, delayMs);
    return job;
  };

  return {
    start: (dialect, request, delayMs, extra = {}) => make(dialect, request, delayMs, extra),
    get(id, delayMs) {
      const kept = jobs.get(id);
      if (kept) return kept;
      const restored = restoredRequest(id);
      return restored && make(restored.dialect, restored.request, delayMs, {}, id);
    },
    cancel(id) {
      const job = jobs.get(id);
      if (job?.state === "running") {
        clearTimeout(job.timer);
        job.timer = undefined;
        job.state = "cancelled";
        job.completedAt = Math.floor(Date.now() / 1000);
      }
      return job;
    },
    clear() {
      for (const id of [...jobs.keys()]) remove(id);
    },
  };
}

/** Draws a job's pictures (or refuses its prompt, as the route would); resolves the bytes it holds. */
async function finish(job: DemoJob): Promise<number> {
  if (job.state !== "running") return 0;
  job.completedAt = Math.floor(Date.now() / 1000);
  try {
    refuseFailPrompt(job.request.prompt);
    const result = await drawImages(job.request);
    if (job.state !== "running" || !result) return 0;
    job.result = result;
    job.state = "completed";
    return JSON.stringify(result.data).length;
  } catch (err) {
    if (job.state !== "running") return 0;
    job.state = "failed";
    job.error =
      err instanceof DemoRequestError
        ? err.body
        : { message: "The demo channel failed to draw the image.", type: "server_error" };
    job.httpStatus = err instanceof DemoRequestError ? err.status : 500;
    return 0;
  }
}

function newJobId(dialect: DemoJobDialect, request: DrawRequest): string {
  const { width, height } = request.size;
  return `${PREFIXES[dialect]}${randomBytes(12).toString("hex")}_${request.n}_${width}x${height}`;
}

/** What a job id the demo no longer holds draws: its `n` and size, from its id. */
function restoredRequest(
  id: string,
): { dialect: DemoJobDialect; request: DrawRequest } | undefined {
  const match = JOB_ID.exec(id);
  const size = match && parseDemoImageSize(match[3]);
  if (!match || !size) return undefined;
  const dialect = (Object.keys(PREFIXES) as DemoJobDialect[]).find(
    (name) => PREFIXES[name] === match[1],
  ) as DemoJobDialect;
  const n = Math.min(10, Math.max(1, Number(match[2])));
  return { dialect, request: { model: undefined, seed: id, n, size, inputImages: 0 } };
}
