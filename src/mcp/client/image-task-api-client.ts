import { imageTaskSchema, type ImageTask, type WatchTaskOptions } from "./image-task.js";
import { ImageTaskApiError } from "./image-task-api-error.js";
import {
  fetchOrThrow,
  httpError,
  parseRetryAfter,
  protocolError,
  readBytes,
  readText,
} from "./image-task-api-http.js";
import { watchTaskEvents } from "./watch-task-events.js";

export { apiError, formatBytes, parseRetryAfter } from "./image-task-api-http.js";
export type { ImageTask, ImageTaskEvent, WatchTaskOptions } from "./image-task.js";

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
  /** Partial images streamed while the image is made (0 to 3). */
  partial_images?: number;
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
  /**
   * Follows the task's events for up to `waitSeconds`, calling `onEvent` for
   * each; resolves the finished task from its final event, or undefined when
   * the time ran out (or the stream was cut) first. Rejects as the other calls
   * do (an older service without event streams: HTTP 404 `not_found`).
   */
  watchTask?(taskId: string, options: WatchTaskOptions): Promise<ImageTask | undefined>;
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
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

const DEFAULT_REQUEST_TIMEOUT_MS = 15_000;
const DEFAULT_DOWNLOAD_TIMEOUT_MS = 30_000;

/** The client's settings, defaults filled in. */
interface ApiState {
  options: ImageTaskApiClientOptions;
  /** `options.baseUrl` without trailing slashes. */
  baseUrl: string;
  origin: string;
  doFetch: typeof fetch;
  requestTimeoutMs: number;
  downloadTimeoutMs: number;
  maxDownloadBytes: number;
  maxResponseBytes: number;
}

/**
 * Builds the HTTP client both MCP transports share, so that every API failure (bad key, unknown
 * task, full queue, unreachable service, a proxy's HTML page) becomes one {@link ImageTaskApiError}
 * with a readable message instead of an exception the model cannot act on.
 */
export function createImageTaskApiClient(options: ImageTaskApiClientOptions): ImageTaskApiClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const s: ApiState = {
    options,
    baseUrl,
    origin: new URL(baseUrl).origin,
    doFetch: options.fetch ?? fetch,
    requestTimeoutMs: options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    downloadTimeoutMs: options.downloadTimeoutMs ?? DEFAULT_DOWNLOAD_TIMEOUT_MS,
    maxDownloadBytes: options.maxDownloadBytes ?? MAX_IMAGE_BYTES,
    maxResponseBytes: options.maxResponseBytes ?? MAX_ANSWER_BYTES,
  };
  return {
    baseUrl,
    async submitTask(body, signal) {
      return (await send(s, "POST", "/images/tasks", body, signal)).task;
    },
    getTask: (taskId, signal, getOptions) => getTask(s, taskId, signal, getOptions),
    watchTask: (taskId, watch) =>
      watchTaskEvents(
        {
          baseUrl,
          fetch: s.doFetch,
          authorization: options.authorization,
          credentialHint: options.credentialHint,
          requestTimeoutMs: s.requestTimeoutMs,
          maxEventBytes: s.maxResponseBytes,
        },
        taskId,
        watch,
      ),
    async cancelTask(taskId, signal) {
      const path = `/images/tasks/${encodeURIComponent(taskId)}/cancel`;
      return (await send(s, "POST", path, {}, signal)).task;
    },
    downloadImage: (url, signal) => downloadImage(s, url, signal),
  };
}

/**
 * One call to the API, answered with a task: JSON in and out, the answer read
 * within `maxResponseBytes`, every failure an {@link ImageTaskApiError}.
 */
async function send(
  s: ApiState,
  method: "GET" | "POST",
  path: string,
  body: unknown,
  signal: AbortSignal | undefined,
  /** How long the service may hold its answer on purpose (a wait), on top of the timeout. */
  heldMs = 0,
): Promise<{ task: ImageTask; response: Response }> {
  const { options, baseUrl, requestTimeoutMs } = s;
  const headers: Record<string, string> = { accept: "application/json" };
  if (options.authorization) headers.authorization = options.authorization;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetchOrThrow(
    s.doFetch,
    `${baseUrl}${path}`,
    { method, headers, body: body === undefined ? undefined : JSON.stringify(body) },
    requestTimeoutMs + heldMs,
    signal,
    baseUrl,
  );
  const text = await readText(response, signal, requestTimeoutMs, baseUrl, s.maxResponseBytes);
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

/** {@link ImageTaskApiClient.getTask}. */
async function getTask(
  s: ApiState,
  taskId: string,
  signal: AbortSignal | undefined,
  options: GetTaskOptions = {},
): Promise<ImageTaskSnapshot> {
  // Whole seconds: the service takes up to 60, and a few ms more are harmless.
  const wait = Math.min(60, Math.ceil(Math.max(0, options.waitSeconds ?? 0)));
  // The service's own image links, whatever its images.links: the one origin images are
  // downloaded from (presigned or CDN links would be another).
  const { task, response } = await send(
    s,
    "GET",
    `/images/tasks/${encodeURIComponent(taskId)}?${wait > 0 ? `wait=${wait}&` : ""}links=service`,
    undefined,
    signal,
    wait * 1000,
  );
  return { task, retryAfterSeconds: parseRetryAfter(response.headers.get("retry-after")) };
}

/** {@link ImageTaskApiClient.downloadImage}. */
async function downloadImage(
  s: ApiState,
  url: string,
  signal: AbortSignal | undefined,
): Promise<DownloadedImage> {
  const { origin, baseUrl, downloadTimeoutMs } = s;
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
    s.doFetch,
    target.href,
    { method: "GET", redirect: "error" },
    downloadTimeoutMs,
    signal,
    baseUrl,
  );
  if (!response.ok) {
    const text = await readText(response, signal, downloadTimeoutMs, baseUrl, s.maxResponseBytes);
    throw httpError(response, text, s.options.credentialHint, "Downloading an image failed");
  }
  const bytes = await readBytes(response, s.maxDownloadBytes, baseUrl, "image");
  return { bytes, contentType: response.headers.get("content-type") ?? undefined };
}
