import { ImageEnd } from "../../images/image-end.js";
import { isJsonMediaType } from "../../net/is-json-media-type.js";
import { JsonDocumentEnd } from "../../net/json-document-end.js";
import { readBodyToEnd, type DocumentEnd } from "../../net/read-body-to-end.js";
import { BodyTooLargeError, readCappedBody } from "../../net/read-capped-body.js";
import { ImageTaskApiError, refusalHint } from "./image-task-api-error.js";

/*
 * The HTTP steps of the MCP server's API client and how each failure reads:
 * one ImageTaskApiError with a message the model can act on.
 */

const MAX_MESSAGE_CHARS = 500;

/** `fetch` within `timeoutMs` (and `signal`); a failure becomes a readable error. */
export async function fetchOrThrow(
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

/** Why a call to the service failed before an answer: the caller's abort, a timeout, or the network. */
export function networkError(
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
export async function readText(
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

/**
 * A body of the service within `maxBytes`; over it a "refused" error, broken
 * off a "network" one. An image is read to its own last byte and a JSON
 * answer to its object's end: a proxy or CDN before the service that holds
 * one open after it (never sending the last chunk) would otherwise stall the
 * tool call until its timeout. Anything else is read to its end.
 */
export async function readBytes(
  response: Response,
  maxBytes: number,
  baseUrl: string,
  what: "image" | "answer",
): Promise<Buffer> {
  const end = documentEndOf(response, what);
  try {
    return await (end
      ? readBodyToEnd(response, maxBytes, end)
      : readCappedBody(response, maxBytes));
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

/** An error answer of the service, read from its OpenAI envelope when it has one. */
export function httpError(
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
 * The error a tool shows for an error answer of the HTTP API: status, code,
 * message and what to do.
 */
export function apiError(
  answer: { status: number; code?: string; message?: string; retryAfter?: string | null },
  credentialHint: string,
  prefix = "The image service answered",
): ImageTaskApiError {
  const { status, code, message } = answer;
  const label = code ? `HTTP ${status} ${code}` : `HTTP ${status}`;
  const parts = [`${prefix} ${label}${message ? `: ${truncate(message)}` : "."}`];
  const hint = refusalHint(
    code,
    status,
    parseRetryAfter(answer.retryAfter ?? null),
    credentialHint,
  );
  if (hint) parts.push(hint);
  return new ImageTaskApiError("http", parts.join(" "), status, code);
}

/** An answer that is not what the service gives: the base URL points elsewhere. */
export function protocolError(response: Response, what: string): ImageTaskApiError {
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

/** What follows the body's document to its end: an image, a JSON answer, or nothing known. */
function documentEndOf(response: Response, what: "image" | "answer"): DocumentEnd | undefined {
  if (what === "image") return new ImageEnd();
  const json = isJsonMediaType(response.headers.get("content-type") ?? "");
  return json ? new JsonDocumentEnd() : undefined;
}
