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
  { ok: true; value: unknown } | { ok: false; status: number; error: OpenAiErrorBody };

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
    return { ok: true, value: JSON.parse(text) as unknown };
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
