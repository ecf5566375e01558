import type { IncomingMessage, ServerResponse } from "node:http";

/** The `error` object of an OpenAI error envelope. */
export interface OpenAiErrorBody {
  message: string;
  type: string;
  param: string | null;
  code: string | null;
}

/** Sends a JSON body with an explicit length, so keep-alive clients know where it ends. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const payload = Buffer.from(JSON.stringify(body));
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": payload.length,
  });
  res.end(payload);
}

/**
 * Answers with the OpenAI error envelope, the only error shape OpenAI clients (and the service's
 * proxy, which passes channel errors on as they are) know how to read.
 */
export function sendOpenAiError(
  res: ServerResponse,
  status: number,
  error: Partial<OpenAiErrorBody> & { message: string },
): void {
  sendJson(res, status, {
    error: {
      message: error.message,
      type: error.type ?? (status >= 500 ? "server_error" : "invalid_request_error"),
      param: error.param ?? null,
      code: error.code ?? null,
    },
  });
}

/** A parsed request body, or the error to answer with. */
export type JsonBodyResult =
  | { ok: true; value: unknown; bytes: number }
  | { ok: false; status: number; error: OpenAiErrorBody };

/**
 * Reads and parses a JSON request body, refusing bodies over `limitBytes` while they arrive
 * rather than after buffering them whole.
 */
export async function readJsonBody(
  req: IncomingMessage,
  limitBytes: number,
): Promise<JsonBodyResult> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) {
      return {
        ok: false,
        status: 413,
        error: {
          message: `Request body is larger than ${limitBytes} bytes.`,
          type: "invalid_request_error",
          param: null,
          code: "request_too_large",
        },
      };
    }
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    return { ok: true, value: JSON.parse(text) as unknown, bytes: size };
  } catch {
    return {
      ok: false,
      status: 400,
      error: {
        message: "We could not parse the JSON body of your request.",
        type: "invalid_request_error",
        param: null,
        code: "invalid_json",
      },
    };
  }
}

/** Narrows parsed JSON to a plain object so handlers can read fields without casts. */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Sends a text or binary body with its type and an explicit length. */
export function sendBytes(
  res: ServerResponse,
  status: number,
  contentType: string,
  body: Buffer | string,
): void {
  const payload = typeof body === "string" ? Buffer.from(body) : body;
  res.writeHead(status, { "content-type": contentType, "content-length": payload.length });
  res.end(payload);
}

/** Aborts when the client goes away before the response is complete. */
export function clientGoneSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** The error body of a required parameter that is missing. */
export function missingParam(param: string): OpenAiErrorBody {
  return {
    message: `Missing required parameter: '${param}'.`,
    type: "invalid_request_error",
    param,
    code: "missing_required_parameter",
  };
}

/** The error body of a parameter whose value is refused. */
export function invalidParam(param: string, message: string): OpenAiErrorBody {
  return { message, type: "invalid_request_error", param, code: "invalid_value" };
}

/** A request the demo refuses: thrown by handlers, answered by the demo's router. */
export class DemoRequestError extends Error {
  constructor(
    readonly status: number,
    readonly body: Partial<OpenAiErrorBody> & { message: string },
  ) {
    super(body.message);
  }
}

/** Requests over this size are refused; JSON bodies of the service are capped lower anyway. */
const BODY_LIMIT_BYTES = 32 * 1024 * 1024;

/** A JSON object body and its size in bytes (what storing it costs). */
export interface ObjectBody {
  value: Record<string, unknown>;
  bytes: number;
}

/**
 * Reads a JSON object body.
 * @throws DemoRequestError `invalid_json`, `request_too_large`, or `invalid_value` for a non-object
 */
export async function readObjectBody(req: IncomingMessage): Promise<ObjectBody> {
  const body = await readJsonBody(req, BODY_LIMIT_BYTES);
  if (!body.ok) throw new DemoRequestError(body.status, body.error);
  if (!isJsonObject(body.value)) {
    throw new DemoRequestError(400, {
      message: "The request body must be a JSON object.",
      code: "invalid_value",
    });
  }
  return { value: body.value, bytes: body.bytes };
}

/** Reads an optional whole number in `[min, max]`, as JSON numbers or (from a form) digits. */
export function wholeNumber(
  value: unknown,
  param: string,
  min: number,
  max: number,
  fallback: number,
): number {
  if (value === undefined || value === null || value === "") return fallback;
  const number = typeof value === "string" && /^\d{1,9}$/.test(value) ? Number(value) : value;
  if (typeof number !== "number" || !Number.isInteger(number) || number < min || number > max) {
    throw new DemoRequestError(
      400,
      invalidParam(param, `'${param}' must be an integer from ${min} to ${max}.`),
    );
  }
  return number;
}

/** Reads an optional string parameter that must be one of `allowed`. */
export function oneOf<T extends string>(
  value: unknown,
  param: string,
  allowed: readonly T[],
  fallback: T,
): T {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "string" || !(allowed as readonly string[]).includes(value)) {
    throw new DemoRequestError(
      400,
      invalidParam(param, `'${param}' must be one of ${allowed.map((v) => `'${v}'`).join(", ")}.`),
    );
  }
  return value as T;
}
