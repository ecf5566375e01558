import { setTimeout as sleep } from "node:timers/promises";
import { expect } from "vitest";
import type {
  BifrostError,
  BifrostJob,
  Sub2apiTask,
  TaskError,
} from "../../../src/contract/task-contract.js";
import { encodePng } from "../../../src/demo/png-encoder.js";
import { expectNoLeak, type Target } from "../task-api.js";

/*
 * The async dialects as their clients speak them: plain fetch, the routes,
 * headers and bodies of sub2api's and Bifrost's public documentation.
 */

/** The OpenAI error envelope's `error`, as every refusal answers it. */
type EnvelopeError = TaskError & { param?: string | null };

/** What sub2api's client reads: the task (the contract's type), or the error envelope. */
export type Sub2apiBody = Sub2apiTask & { error?: EnvelopeError };

/** What Bifrost's client reads: the job (the contract's type), or the error envelope. */
export type BifrostBody = Omit<BifrostJob, "error"> & {
  error?: BifrostError & Partial<EnvelopeError>;
};

/**
 * Any answer as a test reads it without a dialect's type: a native task, a
 * page of the list, an error envelope.
 */
export type LooseBody = {
  id?: string;
  object?: string;
  status?: string;
  error?: EnvelopeError;
  data?: LooseBody[];
  first_id?: string | null;
  last_id?: string | null;
  has_more?: boolean;
  [field: string]: unknown;
};

/** A JSON answer as a dialect's client reads it. */
export interface DialectResponse<T = LooseBody> {
  status: number;
  headers: Headers;
  /** Parsed JSON; `{}` when the body was not JSON. */
  body: T;
  text: string;
}

export interface DialectCall {
  /** Bearer key; default the target's. */
  key?: string;
  json?: unknown;
  form?: FormData;
  headers?: Record<string, string>;
}

/** One call, as a client makes it. */
export async function dialectCall<T = LooseBody>(
  target: Target,
  method: string,
  path: string,
  options: DialectCall = {},
): Promise<DialectResponse<T>> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${options.key ?? target.key}`,
    ...options.headers,
  };
  let body: string | FormData | undefined;
  if (options.json !== undefined) {
    headers["content-type"] = "application/json";
    body = JSON.stringify(options.json);
  } else if (options.form) {
    body = options.form;
  }
  const response = await fetch(`${target.url}${path}`, { method, headers, body });
  const text = await response.text();
  let parsed = {} as T;
  try {
    parsed = JSON.parse(text) as T;
  } catch {
    // Not JSON: `text` tells.
  }
  expectNoLeak(text);
  return { status: response.status, headers: response.headers, body: parsed, text };
}

/** sub2api's submission of a generation (`gpt-image-1` unless the body names a model). */
export function submitSub2api(
  target: Target,
  body: Record<string, unknown>,
  options: Omit<DialectCall, "json" | "form"> = {},
): Promise<DialectResponse<Sub2apiBody>> {
  return dialectCall<Sub2apiBody>(target, "POST", "/v1/images/generations/async", {
    ...options,
    json: { model: "gpt-image-1", ...body },
  });
}

/** sub2api's submission that must be accepted; the task id. */
export async function submitSub2apiOk(
  target: Target,
  body: Record<string, unknown>,
  options: Omit<DialectCall, "json" | "form"> = {},
): Promise<string> {
  const response = await submitSub2api(target, body, options);
  expect(response.status, response.text).toBe(202);
  return response.body.id;
}

/** sub2api's poll. */
export function pollSub2api(
  target: Target,
  id: string,
  key?: string,
): Promise<DialectResponse<Sub2apiBody>> {
  return dialectCall<Sub2apiBody>(target, "GET", `/v1/images/tasks/${id}`, key ? { key } : {});
}

/** Polls a sub2api task until its status is one of `statuses`. */
export async function sub2apiUntil(
  target: Target,
  id: string,
  statuses: readonly string[],
  timeoutMs = 10_000,
): Promise<DialectResponse<Sub2apiBody>> {
  return until(() => pollSub2api(target, id), statuses, timeoutMs, `task ${id}`);
}

/** Bifrost's submission of a generation (or, `kind: "edits"`, of an edit). */
export function submitBifrost(
  target: Target,
  body: Record<string, unknown>,
  options: Omit<DialectCall, "json" | "form"> = {},
): Promise<DialectResponse<BifrostBody>> {
  return dialectCall<BifrostBody>(target, "POST", "/v1/async/images/generations", {
    ...options,
    json: { model: "gpt-image-1", ...body },
  });
}

/** Bifrost's submission that must be accepted; the job id. */
export async function submitBifrostOk(
  target: Target,
  body: Record<string, unknown>,
  options: Omit<DialectCall, "json" | "form"> = {},
): Promise<string> {
  const response = await submitBifrost(target, body, options);
  expect(response.status, response.text).toBe(202);
  return response.body.id;
}

/** Bifrost's poll of a generation job (`edits` for an edit job). */
export function pollBifrost(
  target: Target,
  id: string,
  kind: "generations" | "edits" = "generations",
  key?: string,
): Promise<DialectResponse<BifrostBody>> {
  return dialectCall<BifrostBody>(
    target,
    "GET",
    `/v1/async/images/${kind}/${id}`,
    key ? { key } : {},
  );
}

/** Polls a Bifrost job until its status is one of `statuses`. */
export async function bifrostUntil(
  target: Target,
  id: string,
  statuses: readonly string[],
  kind: "generations" | "edits" = "generations",
  timeoutMs = 10_000,
): Promise<DialectResponse<BifrostBody>> {
  return until(() => pollBifrost(target, id, kind), statuses, timeoutMs, `job ${id}`);
}

async function until<T extends { status: string }>(
  poll: () => Promise<DialectResponse<T>>,
  statuses: readonly string[],
  timeoutMs: number,
  what: string,
): Promise<DialectResponse<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = await poll();
    if (statuses.includes(last.body.status)) return last;
    if (last.status >= 400 || Date.now() > deadline) {
      throw new Error(`${what} did not reach ${statuses.join("|")}: ${last.status} ${last.text}`);
    }
    await sleep(25);
  }
}

/** A small PNG the service takes as an edit's input. */
export function inputPng(seed = 1): Buffer {
  return encodePng({
    width: 2,
    height: 2,
    channels: 3,
    pixels: Uint8Array.from({ length: 12 }, (_, i) => (i * 29 + seed * 11) & 0xff),
  });
}

/** An edit's multipart body as the openai SDK sends it: the fields, then `image`. */
export function editForm(fields: Record<string, string>, image = inputPng()): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  form.append("image", new Blob([image], { type: "image/png" }), "in.png");
  return form;
}

/** Base64 that decodes to a PNG. */
export function expectPngBase64(value: unknown): void {
  expect(typeof value).toBe("string");
  const bytes = Buffer.from(value as string, "base64");
  expect(bytes.subarray(1, 4).toString("latin1")).toBe("PNG");
}
