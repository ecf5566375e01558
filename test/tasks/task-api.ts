import { slow } from "../support/time-factor.js";
import { pollPauses } from "../support/poll-pauses.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, onTestFinished } from "vitest";
import { UPSTREAM_KEY, startTestApp, type TestAppOptions } from "../support/start-test-app.js";

/** What the task routes answer: a task, or the OpenAI error envelope (`error` then has `param`). */
export interface TaskJson {
  id: string;
  object: string;
  status: string;
  created: number;
  model: string;
  started_at?: number;
  completed_at?: number;
  expires_at?: number;
  data?: Array<{ url?: string; b64_json?: string; revised_prompt?: string }>;
  usage?: Record<string, unknown>;
  error?: { code: string | null; message: string; type: string; param?: string | null };
}

/** A response as a client sees it. */
export interface ApiResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON; `{}` when the body was not JSON (see `text`). */
  body: TaskJson;
  text: string;
}

/** Anything with a service URL and a default key: a test app, or a service a test started itself. */
export interface Target {
  url: string;
  key: string;
}

export interface CallOptions {
  /** Bearer key; default the target's key; `null` sends no Authorization header. */
  key?: string | null;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as it is (for malformed bodies). */
  raw?: string;
  headers?: Record<string, string>;
}

/** One HTTP call to the service, as a client makes it. */
export async function call(
  target: Target,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<ApiResponse> {
  const key = options.key === undefined ? target.key : options.key;
  const headers: Record<string, string> = { ...options.headers };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  let body: string | undefined;
  if (options.json !== undefined) {
    headers["content-type"] = "application/json";
    body = JSON.stringify(options.json);
  } else if (options.raw !== undefined) {
    headers["content-type"] ??= "application/json";
    body = options.raw;
  }
  const response = await fetch(`${target.url}${path}`, { method, headers, body });
  const text = await response.text();
  let parsed: TaskJson;
  try {
    parsed = JSON.parse(text) as TaskJson;
  } catch {
    parsed = {} as TaskJson;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

/** `POST /v1/images/tasks`. */
export function submit(
  target: Target,
  body: Record<string, unknown>,
  options: Omit<CallOptions, "json" | "raw"> = {},
): Promise<ApiResponse> {
  return call(target, "POST", "/v1/images/tasks", {
    ...options,
    json: { model: "gpt-image-1", ...body },
  });
}

/** `POST /v1/images/tasks` that must be accepted; the task's id. */
export async function submitOk(
  target: Target,
  body: Record<string, unknown>,
  options: Omit<CallOptions, "json" | "raw"> = {},
): Promise<string> {
  const response = await submit(target, body, options);
  expect(response.status, response.text).toBe(202);
  return response.body.id;
}

/** `GET /v1/images/tasks/{id}`. */
export function getTask(target: Target, id: string, key?: string | null): Promise<ApiResponse> {
  return call(target, "GET", `/v1/images/tasks/${id}`, { key });
}

/** `POST /v1/images/tasks/{id}/cancel`. */
export function cancelTask(target: Target, id: string, key?: string | null): Promise<ApiResponse> {
  return call(target, "POST", `/v1/images/tasks/${id}/cancel`, { key });
}

/** Polls the task until its status is one of `statuses`; fails the test after `timeoutMs`. */
export async function waitForStatus(
  target: Target,
  id: string,
  statuses: readonly string[],
  timeoutMs = 10_000,
  key?: string,
): Promise<ApiResponse> {
  const deadline = Date.now() + slow(timeoutMs);
  const pause = pollPauses();
  let last: ApiResponse | undefined;
  for (;;) {
    last = await getTask(target, id, key);
    if (last.status === 200 && statuses.includes(last.body.status)) return last;
    if (last.status !== 200 || Date.now() > deadline) {
      throw new Error(
        `task ${id} did not reach ${statuses.join("|")} within ${timeoutMs} ms; last answer ${last.status} ${last.text}`,
      );
    }
    await pause();
  }
}

/** Waits until `check` holds; fails the test after `timeoutMs`. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + slow(timeoutMs);
  const pause = pollPauses();
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await pause();
  }
}

/** Asserts an OpenAI error envelope with this status and code, and nothing that must not leak. */
export function expectError(
  response: ApiResponse,
  status: number,
  code: string,
  param?: string | null,
): void {
  expect(response.status, response.text).toBe(status);
  expect(response.headers.get("content-type")).toMatch(/^application\/json/);
  expect(Object.keys(response.body).sort()).toEqual(["error"]);
  const error = response.body.error!;
  expect(Object.keys(error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(error.code).toBe(code);
  expect(typeof error.message).toBe("string");
  expect(error.message.length).toBeGreaterThan(0);
  expect(typeof error.type).toBe("string");
  if (param !== undefined) expect(error.param).toBe(param);
  expectNoLeak(response.text);
}

/** No channel key, stack trace or HTML in what a client receives. */
export function expectNoLeak(text: string): void {
  expect(text).not.toContain(UPSTREAM_KEY);
  expect(text).not.toMatch(/\n\s+at /);
  expect(text.toLowerCase()).not.toContain("<html");
}

/** Starts a test app that is closed when the test ends. */
export async function useApp(options: TestAppOptions = {}) {
  const app = await startTestApp(options);
  onTestFinished(() => app.close());
  return app;
}

/** A temporary directory removed when the test ends. */
export async function useTempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "image-tasks-"));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** The prompts of the image generations the upstream received, in order of arrival. */
export function upstreamPrompts(upstream: { requests: Array<{ path: string; body: unknown }> }) {
  return upstream.requests
    .filter((request) => request.path.endsWith("/images/generations"))
    .map((request) => (request.body as { prompt?: string }).prompt);
}

export const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export const TASK_ID = /^task_[A-Za-z0-9_-]{22,}$/;
