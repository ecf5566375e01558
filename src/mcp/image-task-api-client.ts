import { z } from "zod";
import { BodyTooLargeError, readCappedBody } from "../net/read-capped-body.js";
import { ImageTaskApiError } from "./image-task-api-error.js";

const imageTaskSchema = z
  .object({
    id: z.string(),
    object: z.string().optional(),
    status: z.enum(["queued", "in_progress", "completed", "failed"]),
    created: z.number().optional(),
    model: z.string().optional(),
    started_at: z.number().nullish(),
    completed_at: z.number().nullish(),
    expires_at: z.number().nullish(),
    data: z
      .array(
        z
          .object({
            url: z.string().optional(),
            b64_json: z.string().optional(),
            revised_prompt: z.string().nullish(),
          })
          .loose(),
      )
      .nullish(),
    error: z
      .object({
        code: z.string().nullish(),
        message: z.string().nullish(),
        type: z.string().nullish(),
      })
      .loose()
      .nullish(),
  })
  .loose();

/** A task as the HTTP API returns it (`GET /v1/images/tasks/{id}`). */
export type ImageTask = z.infer<typeof imageTaskSchema>;

/** A task together with the server's polling hint. */
export interface ImageTaskSnapshot {
  task: ImageTask;
  /** From `Retry-After`, present while the task is unfinished. */
  retryAfterSeconds: number | undefined;
}

/** Body of `POST /v1/images/tasks`. */
export interface SubmitImageTaskRequest {
  model: string;
  prompt: string;
  size?: string;
  n?: number;
  quality?: string;
  background?: string;
  output_format?: string;
  response_format: "url" | "b64_json";
}

/** Bytes of one image fetched from the service's signed URL. */
export interface DownloadedImage {
  bytes: Uint8Array;
  contentType: string | undefined;
}

/** Options of {@link ImageTaskApiClient.getTask}. */
export interface GetTaskOptions {
  /**
   * Seconds the service may hold the answer until the task finishes
   * (`GET ...?wait=N`, at most 60); 0 or absent: answer at once.
   */
  waitSeconds?: number;
}

/** The part of the service's HTTP API the MCP tools use. */
export interface ImageTaskApiClient {
  readonly baseUrl: string;
  submitTask(body: SubmitImageTaskRequest, signal?: AbortSignal): Promise<ImageTask>;
  getTask(
    taskId: string,
    signal?: AbortSignal,
    options?: GetTaskOptions,
  ): Promise<ImageTaskSnapshot>;
  cancelTask(taskId: string, signal?: AbortSignal): Promise<ImageTask>;
  /** Fetches a signed image URL; refuses any URL not on the API's own origin. */
  downloadImage(url: string, signal?: AbortSignal): Promise<DownloadedImage>;
}

/** What the client needs; nothing is read from the environment. */
export interface ImageTaskApiClientOptions {
  /** The service's `/v1` base URL. */
  baseUrl: string;
  /** The full `Authorization` header value to send, if any. */
  authorization?: string | undefined;
  /** Appended to 401 messages: where the user fixes the credential. */
  credentialHint: string;
  fetch?: typeof fetch;
  requestTimeoutMs?: number;
  downloadTimeoutMs?: number;
  /** Largest image download. Default {@link MAX_IMAGE_BYTES}. */
  maxDownloadBytes?: number;
  /** Largest JSON answer (a task with its `b64_json` items). Default {@link MAX_ANSWER_BYTES}. */
  maxResponseBytes?: number;
}

/** Largest image the MCP server downloads or decodes: 64 MiB. */
export const MAX_IMAGE_BYTES = 64 * 1024 * 1024;
/**
 * Largest JSON answer read from the service: 64 MiB, ten b64_json images of a few MiB each. A
 * service (or whatever answers at OPENAI_BASE_URL) cannot make the MCP server hold more.
 */
export const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

const DEFAULT_REQUEST_TIMEOUT_MS = 15_000;
const DEFAULT_DOWNLOAD_TIMEOUT_MS = 30_000;
const MAX_MESSAGE_CHARS = 500;

/**
 * Builds the HTTP client both MCP transports share, so that every API failure (bad key, unknown
 * task, full queue, unreachable service, a proxy's HTML page) becomes one {@link ImageTaskApiError}
 * with a readable message instead of an exception the model cannot act on.
 */
export function createImageTaskApiClient(options: ImageTaskApiClientOptions): ImageTaskApiClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const origin = new URL(baseUrl).origin;
  const doFetch = options.fetch ?? fetch;
  const requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const downloadTimeoutMs = options.downloadTimeoutMs ?? DEFAULT_DOWNLOAD_TIMEOUT_MS;
  const maxDownloadBytes = options.maxDownloadBytes ?? MAX_IMAGE_BYTES;
  const maxResponseBytes = options.maxResponseBytes ?? MAX_ANSWER_BYTES;

  async function send(
    method: "GET" | "POST",
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    /** How long the service may hold its answer on purpose (a wait), on top of the timeout. */
    heldMs = 0,
  ): Promise<{ task: ImageTask; response: Response }> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (options.authorization) headers.authorization = options.authorization;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetchOrThrow(
      doFetch,
      `${baseUrl}${path}`,
      { method, headers, body: body === undefined ? undefined : JSON.stringify(body) },
      requestTimeoutMs + heldMs,
      signal,
      baseUrl,
    );
    const text = await readText(response, signal, requestTimeoutMs, baseUrl, maxResponseBytes);
    if (!response.ok) throw httpError(response, text, options.credentialHint);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw protocolError(response, "an answer that is not JSON");
    }
    const parsed = imageTaskSchema.safeParse(json);
    if (!parsed.success) throw protocolError(response, "an answer that is not an image task");
    return { task: parsed.data, response };
  }

  return {
    baseUrl,
    async submitTask(body, signal) {
      return (await send("POST", "/images/tasks", body, signal)).task;
    },
    async getTask(taskId, signal, options = {}) {
      // Whole seconds: the service takes up to 60, and a few ms more are harmless.
      const wait = Math.min(60, Math.ceil(Math.max(0, options.waitSeconds ?? 0)));
      // The service's own image links, whatever its images.links: the one origin images are
      // downloaded from (presigned or CDN links would be another).
      const { task, response } = await send(
        "GET",
        `/images/tasks/${encodeURIComponent(taskId)}?${wait > 0 ? `wait=${wait}&` : ""}links=service`,
        undefined,
        signal,
        wait * 1000,
      );
      return { task, retryAfterSeconds: parseRetryAfter(response.headers.get("retry-after")) };
    },
    async cancelTask(taskId, signal) {
      return (await send("POST", `/images/tasks/${encodeURIComponent(taskId)}/cancel`, {}, signal))
        .task;
    },
    async downloadImage(url, signal) {
      let target: URL;
      try {
        // Relative URLs are taken as relative to the service; absolute ones must be on it.
        target = new URL(url, `${origin}/`);
      } catch {
        throw new ImageTaskApiError("refused", "The task holds an image URL that is not a URL.");
      }
      if (target.origin !== origin) {
        throw new ImageTaskApiError(
          "refused",
          `Refused to download ${target.origin}: image URLs are only fetched from the service's ` +
            `own origin ${origin} (OPENAI_BASE_URL). If the service publishes images under ` +
            `another address (server.publicBaseUrl), set OPENAI_BASE_URL to that address.`,
        );
      }
      // No bearer: the URL is signed. No redirects: they could lead off the origin.
      const response = await fetchOrThrow(
        doFetch,
        target.href,
        { method: "GET", redirect: "error" },
        downloadTimeoutMs,
        signal,
        baseUrl,
      );
      if (!response.ok) {
        const text = await readText(response, signal, downloadTimeoutMs, baseUrl, maxResponseBytes);
        throw httpError(response, text, options.credentialHint, "Downloading an image failed");
      }
      const bytes = await readBytes(response, maxDownloadBytes, baseUrl, "image");
      return { bytes, contentType: response.headers.get("content-type") ?? undefined };
    },
  };
}

async function fetchOrThrow(
  doFetch: typeof fetch,
  url: string,
  init: RequestInit,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  baseUrl: string,
): Promise<Response> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  try {
    return await doFetch(url, { ...init, signal: combined });
  } catch (error) {
    throw networkError(error, signal, timeout, timeoutMs, baseUrl);
  }
}

function networkError(
  error: unknown,
  signal: AbortSignal | undefined,
  timeout: AbortSignal,
  timeoutMs: number,
  baseUrl: string,
): unknown {
  if (signal?.aborted) return signal.reason ?? error;
  if (timeout.aborted) {
    return new ImageTaskApiError(
      "timeout",
      `The image service at ${baseUrl} did not answer within ${Math.round(timeoutMs / 1000)} s.`,
    );
  }
  return new ImageTaskApiError(
    "network",
    `Could not reach the image service at ${baseUrl} (${describeCause(error)}). ` +
      `Check that it is running and that OPENAI_BASE_URL points at its /v1 URL.`,
  );
}

function describeCause(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return typeof code === "string" ? code : cause.message.slice(0, 200);
  }
  return "unknown error";
}

/** The body as text, read no further than `maxBytes`. */
async function readText(
  response: Response,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  baseUrl: string,
  maxBytes: number,
): Promise<string> {
  try {
    return (await readBytes(response, maxBytes, baseUrl, "answer")).toString("utf8");
  } catch (error) {
    if (!signal?.aborted && error instanceof ImageTaskApiError) throw error;
    throw networkError(error, signal, AbortSignal.timeout(timeoutMs), timeoutMs, baseUrl);
  }
}

/** A body of the service within `maxBytes`; over it a "refused" error, broken off a "network" one. */
async function readBytes(
  response: Response,
  maxBytes: number,
  baseUrl: string,
  what: "image" | "answer",
): Promise<Buffer> {
  try {
    return await readCappedBody(response, maxBytes);
  } catch (error) {
    if (error instanceof BodyTooLargeError) throw tooLargeError(maxBytes, what);
    throw new ImageTaskApiError(
      "network",
      `${what === "image" ? "Downloading an image" : "Reading an answer"} from ${baseUrl} ` +
        `broke off (${describeCause(error)}).`,
    );
  }
}

function tooLargeError(maxBytes: number, what: "image" | "answer"): ImageTaskApiError {
  const size = formatBytes(maxBytes);
  return new ImageTaskApiError(
    "refused",
    what === "image"
      ? `Refused an image larger than ${size}.`
      : `Refused an answer of the image service larger than ${size}; nothing was saved.`,
  );
}

/** `64 MiB`, or bytes below 1 MiB. */
export function formatBytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${Math.round(bytes / (1024 * 1024))} MiB` : `${bytes} bytes`;
}

function httpError(
  response: Response,
  text: string,
  credentialHint: string,
  prefix = "The image service answered",
): ImageTaskApiError {
  let code: string | undefined;
  let message: string | undefined;
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (typeof body.error?.code === "string") code = body.error.code;
    if (typeof body.error?.message === "string") message = body.error.message;
  } catch {
    // Not the OpenAI envelope (a proxy's page, say): the status alone has to do.
  }
  return apiError(
    { status: response.status, code, message, retryAfter: response.headers.get("retry-after") },
    credentialHint,
    prefix,
  );
}

/**
 * The error a tool shows for an error answer of the API (over HTTP, or the
 * service's own `AppError` in process): status, code, message and what to do.
 */
export function apiError(
  answer: { status: number; code?: string; message?: string; retryAfter?: string | null },
  credentialHint: string,
  prefix = "The image service answered",
): ImageTaskApiError {
  const { status, code, message } = answer;
  const label = code ? `HTTP ${status} ${code}` : `HTTP ${status}`;
  const parts = [`${prefix} ${label}${message ? `: ${truncate(message)}` : "."}`];
  const hint = hintFor(status, code, answer.retryAfter ?? null, credentialHint);
  if (hint) parts.push(hint);
  return new ImageTaskApiError("http", parts.join(" "), status, code);
}

function hintFor(
  status: number,
  code: string | undefined,
  retryAfter: string | null,
  credentialHint: string,
): string | undefined {
  if (status === 401 || status === 403) return credentialHint;
  switch (code) {
    case "task_not_found":
      return "Tasks are visible only to the key that submitted them, and expire after a while.";
    case "model_not_found":
      return "Use a model this key may use (gpt-image-1 by default).";
    case "unsupported_model":
      return "Only gpt-image-* models run as image tasks.";
    case "queue_full": {
      const retry = parseRetryAfter(retryAfter);
      return retry === undefined
        ? "Try again in a little while."
        : `Try again in about ${retry} s.`;
    }
    default:
      return status >= 500
        ? "The service or its upstream is having trouble; try again later."
        : undefined;
  }
}

function protocolError(response: Response, what: string): ImageTaskApiError {
  return new ImageTaskApiError(
    "protocol",
    `The image service answered HTTP ${response.status} with ${what} ` +
      `(content-type ${response.headers.get("content-type") ?? "none"}). ` +
      `Check that OPENAI_BASE_URL points at image-task-sidecar's /v1 URL.`,
    response.status,
  );
}

function truncate(text: string): string {
  return text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS)}…` : text;
}

/** Seconds from a `Retry-After` header (delta-seconds or an HTTP date). */
export function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - Date.now()) / 1000));
}
