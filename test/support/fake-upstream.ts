import { createHash, randomBytes } from "node:crypto";
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { Readable } from "node:stream";
import busboy from "busboy";
import { encodePng } from "../../src/demo/png-encoder.js";
import { modelReadings, type ModelReadings } from "./json-readings.js";

/** How a route answers. */
export type Behavior =
  /** Normal answer, after an optional delay. */
  | { kind: "ok"; delayMs?: number }
  /** Accept the request and never answer, until the client aborts or the fake closes. */
  | { kind: "hang" }
  /** Answer `status` with `body` as JSON (default: an OpenAI error envelope). */
  | { kind: "status"; status: number; body?: unknown }
  /** Destroy the socket without answering. */
  | { kind: "reset" }
  /** 200 with `content-type: application/json` and a body that is not JSON. */
  | { kind: "garbage" }
  /** 200 with the headers and half the body (its Content-Length promising all), then a reset. */
  | { kind: "cut" }
  /** 200 JSON, properly framed (chunked) but the JSON stops half-way. */
  | { kind: "truncated" }
  /** 200 headers (and for a stream, a first event), then silence until the client goes. */
  | { kind: "stall" }
  /** A redirect to `location`. */
  | { kind: "redirect"; status?: number; location: string }
  /**
   * Echoes the bearer key it got in every spelling: literal, `\/`-escaped, `\uXXXX` per
   * character in both hex cases and mixed, in allowed and other headers and in the body
   * (as an event stream split mid-key when the request asked for a stream), with `status`
   * (default 200; an error status answers an OpenAI error envelope), compressed with
   * `encoding` if given.
   */
  | { kind: "echo-key"; status?: number; encoding?: "gzip" | "br" | "deflate" }
  /** The test answers itself: huge, endless or odd answers. */
  | { kind: "custom"; respond: RouteHandler };

/** A multipart form as the fake received it. */
export interface RecordedForm {
  /** Text fields, first value of each name (as Go's FormValue reads). */
  fields: Record<string, string>;
  /** How many parts each name had. */
  counts: Record<string, number>;
  files: Record<string, { filename: string; size: number; sha256: string }>;
}

/** Answers one request; `body` is the parsed request body (see {@link RecordedRequest}). */
export type RouteHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  body: unknown,
) => void | Promise<void>;

/** A request as the fake received it. */
export interface RecordedRequest {
  method: string;
  /** `req.url` as sent: path and query, e.g. `/v1/chat/completions`. */
  path: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON, the form's text fields, the raw string if neither, `undefined` if empty. */
  body: unknown;
  /** The body's bytes. */
  raw: Buffer;
  /** What JSON parsers of different channels read as the model (JSON bodies). */
  model?: ModelReadings;
  /** A multipart body. */
  form?: RecordedForm;
  /** A multipart body's parts, in order, files byte for byte (as busboy reads them). */
  parts?: MultipartPart[];
}

/** One part of a multipart body the fake received. */
export interface MultipartPart {
  name: string;
  /** Set for file parts. */
  filename?: string;
  contentType?: string;
  data: Buffer;
}

export interface FakeUpstreamOptions {
  /** Models listed by `/v1/models`; default `["gpt-4o-mini", "gpt-4o", "gpt-image-1", "dall-e-3"]`. */
  models?: string[];
  /** Shows up in chat answers (`Hello from <name>`) and the `x-fake-upstream` header. */
  name?: string;
}

export type FakeRoute =
  | "chat"
  | "images"
  | "models"
  | "responses"
  | "stored-response"
  | "embeddings"
  | "completions"
  | "moderations"
  | "speech"
  | "edits"
  | "variations"
  | "transcriptions"
  | "translations";

export interface FakeUpstream {
  /** `http://127.0.0.1:PORT/v1` */
  baseUrl: string;
  /** `http://127.0.0.1:PORT`: the channel's origin, where its image URLs may point. */
  origin: string;
  /** Every request, in order of arrival (recorded once its body is read). */
  requests: RecordedRequest[];
  /** Image generations (and edits) being answered right now. */
  readonly inFlight: number;
  /** The most image generations (and edits) seen at once. */
  readonly maxInFlight: number;
  /** The most image generations with one prompt seen at once (a task run twice at once shows as 2). */
  readonly maxInFlightPerPrompt: number;
  /** Requests whose client went away before the answer was complete. */
  readonly aborted: number;
  /** Sets the behaviour of one route for all following requests. */
  behave(route: FakeRoute, behavior: Behavior): void;
  /**
   * Serves any method on `pathname` (outside the OpenAI routes) with `handler`, e.g. image
   * files a channel answers as URLs. Kept across reset().
   */
  serve(pathname: string, handler: RouteHandler): void;
  /**
   * Streaming chat and responses send their first chunks, then wait for release() before the
   * rest; lets a test prove chunks reach the client before the upstream finished.
   */
  holdStreams(): void;
  /** Lets held streams finish and stops holding new ones. */
  release(): void;
  /** Resolves when the next request to the route arrives (after its body is read). */
  nextRequest(route: FakeRoute): Promise<RecordedRequest>;
  /**
   * Behaviours back to ok, held streams released, counters and requests cleared. Requests still
   * open from before it no longer move the counters.
   */
  reset(): void;
  /** Closes the server and destroys open sockets, hanging requests included. */
  close(): Promise<void>;
}

const DEFAULT_MODELS = ["gpt-4o-mini", "gpt-4o", "gpt-image-1", "dall-e-3"];

/** A 4x4 PNG, shared by every image answer. */
const TINY_PNG_B64 = encodePng({
  width: 4,
  height: 4,
  channels: 3,
  pixels: Uint8Array.from({ length: 48 }, (_, i) => (i * 53) & 0xff),
}).toString("base64");

/** The "audio" the speech route answers: 48 KiB of a known pattern. */
export const FAKE_SPEECH = Buffer.from(Array.from({ length: 48 * 1024 }, (_, i) => (i * 7) & 0xff));

const POST_ROUTES: Record<string, FakeRoute> = {
  "/v1/chat/completions": "chat",
  "/v1/images/generations": "images",
  "/v1/responses": "responses",
  "/v1/embeddings": "embeddings",
  "/v1/completions": "completions",
  "/v1/moderations": "moderations",
  "/v1/audio/speech": "speech",
  "/v1/images/edits": "edits",
  "/v1/images/variations": "variations",
  "/v1/audio/transcriptions": "transcriptions",
  "/v1/audio/translations": "translations",
};

function routeOf(method: string, pathname: string): FakeRoute | undefined {
  if (method === "POST" && POST_ROUTES[pathname]) return POST_ROUTES[pathname];
  if (method === "GET" && /^\/v1\/models(\/[^/]+)?$/.test(pathname)) return "models";
  if (/^\/v1\/responses\/[^/]+(\/cancel|\/input_items)?$/.test(pathname)) return "stored-response";
  return undefined;
}

/** Parts of a `multipart/form-data` body, read with busboy; undefined when it is not one. */
async function readParts(
  headers: IncomingHttpHeaders,
  raw: Buffer,
): Promise<MultipartPart[] | undefined> {
  const parts: MultipartPart[] = [];
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers });
  } catch {
    return undefined;
  }
  const files: Array<Promise<void>> = [];
  parser.on("field", (name, value) => parts.push({ name, data: Buffer.from(value) }));
  parser.on("file", (name, stream, info) => {
    const part: MultipartPart = {
      name,
      filename: info.filename,
      contentType: info.mimeType,
      data: Buffer.alloc(0),
    };
    parts.push(part);
    const data: Buffer[] = [];
    files.push(
      new Promise((resolve) => {
        stream.on("data", (chunk: Buffer) => data.push(chunk));
        stream.on("end", () => {
          part.data = Buffer.concat(data);
          resolve();
        });
      }),
    );
  });
  const done = new Promise<void>((resolve, reject) => {
    parser.on("close", resolve);
    parser.on("error", reject);
  });
  Readable.from([raw]).pipe(parser);
  await done;
  await Promise.all(files);
  return parts;
}

function errorEnvelope(message: string, type: string, code: string | null): unknown {
  return { error: { message, type, param: null, code } };
}

/** A tiny multipart parser for what the fake records (bodies are whole in memory here). */
function parseForm(contentType: string, raw: Buffer): RecordedForm | undefined {
  const boundary = /boundary="?([^";]+)"?/i.exec(contentType)?.[1];
  if (!boundary) return undefined;
  const form: RecordedForm = { fields: {}, counts: {}, files: {} };
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let at = raw.indexOf(`--${boundary}`);
  if (at === -1) return form;
  at += boundary.length + 2;
  for (;;) {
    if (raw.subarray(at, at + 2).toString() === "--") break;
    const headerEnd = raw.indexOf("\r\n\r\n", at);
    const headers = raw.toString("latin1", at + 2, headerEnd);
    const end = raw.indexOf(delimiter, headerEnd + 4);
    if (headerEnd === -1 || end === -1) break;
    const content = raw.subarray(headerEnd + 4, end);
    const name = /name="([^"]*)"/i.exec(headers)?.[1] ?? "";
    const filename = /filename="([^"]*)"/i.exec(headers)?.[1];
    form.counts[name] = (form.counts[name] ?? 0) + 1;
    if (filename !== undefined) {
      form.files[name] ??= {
        filename,
        size: content.length,
        sha256: createHash("sha256").update(content).digest("hex"),
      };
    } else {
      form.fields[name] ??= content.toString("utf8");
    }
    at = end + delimiter.length;
  }
  return form;
}

/** The spellings a JSON encoder or an echo may give a key. */
export function keySpellings(key: string): string[] {
  const escape = (char: string, upper: boolean) => {
    const hex = char.charCodeAt(0).toString(16).padStart(4, "0");
    return `\\u${upper ? hex.toUpperCase() : hex}`;
  };
  return [
    key,
    key.replaceAll("/", "\\/"),
    [...key].map((char) => escape(char, false)).join(""),
    [...key].map((char) => escape(char, true)).join(""),
    [...key].map((char, i) => (i % 2 === 0 ? escape(char, i % 4 === 0) : char)).join(""),
  ];
}

/**
 * Starts a fake OpenAI-compatible gateway on 127.0.0.1 with a free port, to put the service under
 * test in front of real sockets with scripted failures (hangs, resets, garbage, error statuses).
 */
export async function startFakeUpstream(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const models = options.models ?? DEFAULT_MODELS;
  const name = options.name ?? "fake-upstream";

  const behaviors = new Map<FakeRoute, Behavior>();
  const waiters = new Map<FakeRoute, Array<(request: RecordedRequest) => void>>();
  const requests: RecordedRequest[] = [];
  const extraRoutes = new Map<string, RouteHandler>();
  const stored = new Map<string, Record<string, unknown>>();
  let inFlight = 0;
  let maxInFlight = 0;
  const inFlightByPrompt = new Map<string, number>();
  let maxInFlightPerPrompt = 0;
  let aborted = 0;
  let closing = false;
  /** Bumped by reset(), so requests from before it no longer touch the counters. */
  let epoch = 0;
  let held = false;
  let releaseHeld: (() => void) | undefined;
  let heldPromise: Promise<void> | undefined;

  const release = (): void => {
    held = false;
    releaseHeld?.();
    releaseHeld = undefined;
    heldPromise = undefined;
  };
  const waitForRelease = (): Promise<void> => {
    if (!held) return Promise.resolve();
    heldPromise ??= new Promise<void>((resolve) => (releaseHeld = resolve));
    return heldPromise;
  };
  /** Waits while streams are held; false when the client went away meanwhile. */
  const holdIfAsked = async (res: ServerResponse): Promise<boolean> => {
    if (!held) return true;
    const gone = new Promise<void>((resolve) => res.once("close", resolve));
    await Promise.race([waitForRelease(), gone]);
    return !res.destroyed;
  };

  const readRaw = async (req: IncomingMessage): Promise<Buffer> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    return Buffer.concat(chunks);
  };

  const sendJson = (res: ServerResponse, status: number, body: unknown): void => {
    const payload = JSON.stringify(body);
    res.writeHead(status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(payload),
    });
    res.end(payload);
  };

  /** Resolves after `ms`, or early with `false` when the client goes away. */
  const pause = (res: ServerResponse, ms: number): Promise<boolean> =>
    new Promise((resolve) => {
      if (res.destroyed) return resolve(false);
      const timer = setTimeout(() => {
        res.off("close", onClose);
        resolve(true);
      }, ms);
      const onClose = (): void => {
        clearTimeout(timer);
        resolve(false);
      };
      res.once("close", onClose);
    });

  const now = () => Math.floor(Date.now() / 1000);
  const words = ["Hello ", "from ", `${name}`, "!"];
  const text = words.join("");

  const answerChat = async (res: ServerResponse, body: Record<string, unknown>) => {
    const model = typeof body.model === "string" ? body.model : "unknown";
    const id = `chatcmpl-fake${randomBytes(8).toString("hex")}`;
    const created = now();
    const usage = {
      prompt_tokens: 5,
      completion_tokens: words.length,
      total_tokens: 5 + words.length,
    };
    if (body.stream !== true) {
      sendJson(res, 200, {
        id,
        object: "chat.completion",
        created,
        model,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: text, refusal: null },
            logprobs: null,
            finish_reason: "stop",
          },
        ],
        usage,
      });
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
      `data: ${JSON.stringify({
        id,
        object: "chat.completion.chunk",
        created,
        model,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      })}\n\n`;
    res.write(chunk({ role: "assistant", content: "" }));
    res.write(chunk({ content: words[0] }));
    if (!(await holdIfAsked(res))) return;
    for (const word of words.slice(1)) res.write(chunk({ content: word }));
    res.write(chunk({}, "stop"));
    const options = body.stream_options as { include_usage?: boolean } | undefined;
    if (options?.include_usage) {
      res.write(
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage })}\n\n`,
      );
    }
    res.end("data: [DONE]\n\n");
  };

  const responseObject = (body: Record<string, unknown>, status: string) => {
    const id = `resp_fake${randomBytes(12).toString("hex")}`;
    const messageId = `msg_fake${randomBytes(8).toString("hex")}`;
    return {
      id,
      object: "response",
      created_at: now(),
      status,
      error: null,
      incomplete_details: null,
      instructions: null,
      model: typeof body.model === "string" ? body.model : "unknown",
      output:
        status === "completed"
          ? [
              {
                type: "message",
                id: messageId,
                status: "completed",
                role: "assistant",
                content: [{ type: "output_text", text, annotations: [] }],
              },
            ]
          : [],
      parallel_tool_calls: true,
      previous_response_id: body.previous_response_id ?? null,
      store: true,
      temperature: 1,
      text: { format: { type: "text" } },
      tool_choice: "auto",
      tools: [],
      top_p: 1,
      truncation: "disabled",
      usage:
        status === "completed"
          ? {
              input_tokens: 7,
              input_tokens_details: { cached_tokens: 0 },
              output_tokens: words.length,
              output_tokens_details: { reasoning_tokens: 0 },
              total_tokens: 7 + words.length,
            }
          : null,
      metadata: {},
      input: body.input,
    };
  };
  const publicResponse = (response: Record<string, unknown>) => {
    const { input: _input, ...visible } = response;
    return visible;
  };

  const answerResponses = async (res: ServerResponse, body: Record<string, unknown>) => {
    const previous = body.previous_response_id;
    if (typeof previous === "string" && !stored.has(previous)) {
      sendJson(
        res,
        404,
        errorEnvelope(
          `Previous response with id '${previous}' not found.`,
          "invalid_request_error",
          "previous_response_not_found",
        ),
      );
      return;
    }
    const background = body.background === true;
    const response = responseObject(body, background ? "queued" : "completed");
    stored.set(response.id, response);
    if (body.stream !== true) {
      sendJson(res, 200, publicResponse(response));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    let sequence = 0;
    const send = (type: string, fields: Record<string, unknown>) =>
      res.write(
        `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...fields })}\n\n`,
      );
    const inProgress = {
      ...publicResponse(response),
      status: "in_progress",
      output: [],
      usage: null,
    };
    const item = (response.output[0] ?? {}) as { id?: string };
    const itemId = item.id ?? "msg_fake";
    send("response.created", { response: inProgress });
    send("response.in_progress", { response: inProgress });
    send("response.output_item.added", {
      output_index: 0,
      item: { type: "message", id: itemId, status: "in_progress", role: "assistant", content: [] },
    });
    send("response.content_part.added", {
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      part: { type: "output_text", text: "", annotations: [] },
    });
    send("response.output_text.delta", {
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      delta: words[0],
    });
    if (!(await holdIfAsked(res))) return;
    for (const word of words.slice(1)) {
      send("response.output_text.delta", {
        item_id: itemId,
        output_index: 0,
        content_index: 0,
        delta: word,
      });
    }
    send("response.output_text.done", { item_id: itemId, output_index: 0, content_index: 0, text });
    send("response.content_part.done", {
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      part: { type: "output_text", text, annotations: [] },
    });
    send("response.output_item.done", { output_index: 0, item: response.output[0] });
    send("response.completed", { response: publicResponse(response) });
    res.end();
  };

  const answerStoredResponse = (res: ServerResponse, method: string, pathname: string): void => {
    const [, id, action] = /^\/v1\/responses\/([^/]+)(\/[a-z_]+)?$/.exec(pathname) ?? [];
    const response = stored.get(id ?? "");
    if (!response) {
      sendJson(
        res,
        404,
        errorEnvelope(`Response with id '${id}' not found.`, "invalid_request_error", null),
      );
      return;
    }
    if (method === "DELETE" && !action) {
      stored.delete(id as string);
      sendJson(res, 200, { id, object: "response", deleted: true });
    } else if (method === "POST" && action === "/cancel") {
      response.status = "cancelled";
      sendJson(res, 200, publicResponse(response));
    } else if (method === "GET" && action === "/input_items") {
      const itemId = `msg_in${String(id).slice(-8)}`;
      sendJson(res, 200, {
        object: "list",
        data: [
          {
            id: itemId,
            type: "message",
            role: "user",
            content: [{ type: "input_text", text: String(response.input ?? "") }],
          },
        ],
        first_id: itemId,
        last_id: itemId,
        has_more: false,
      });
    } else if (method === "GET" && !action) {
      sendJson(res, 200, publicResponse(response));
    } else {
      sendJson(res, 404, errorEnvelope("Unknown route", "invalid_request_error", "not_found"));
    }
  };

  const answerImages = (res: ServerResponse, body: Record<string, unknown>): void => {
    const requested = Number(body.n);
    const n = Number.isFinite(requested) ? Math.min(10, Math.max(1, Math.floor(requested))) : 1;
    sendJson(res, 200, {
      created: now(),
      data: Array.from({ length: n }, () => ({ b64_json: TINY_PNG_B64 })),
      usage: {
        input_tokens: 10,
        input_tokens_details: { text_tokens: 10, image_tokens: 0 },
        output_tokens: 100 * n,
        total_tokens: 10 + 100 * n,
      },
    });
  };

  const answerEmbeddings = (res: ServerResponse, body: Record<string, unknown>): void => {
    const inputs = Array.isArray(body.input) ? body.input : [body.input];
    const vector = [0.25, -0.5, 0.125];
    sendJson(res, 200, {
      object: "list",
      data: inputs.map((_, index) => ({
        object: "embedding",
        index,
        embedding:
          body.encoding_format === "base64"
            ? Buffer.from(new Float32Array(vector).buffer).toString("base64")
            : vector,
      })),
      model: body.model,
      usage: { prompt_tokens: 3 * inputs.length, total_tokens: 3 * inputs.length },
    });
  };

  const answerCompletions = (res: ServerResponse, body: Record<string, unknown>): void => {
    sendJson(res, 200, {
      id: `cmpl-fake${randomBytes(6).toString("hex")}`,
      object: "text_completion",
      created: now(),
      model: body.model,
      choices: [{ text, index: 0, logprobs: null, finish_reason: "stop" }],
      usage: { prompt_tokens: 2, completion_tokens: 4, total_tokens: 6 },
    });
  };

  const answerModerations = (res: ServerResponse, body: Record<string, unknown>): void => {
    sendJson(res, 200, {
      id: `modr-fake${randomBytes(6).toString("hex")}`,
      model: body.model,
      results: [
        {
          flagged: false,
          categories: { violence: false, hate: false },
          category_scores: { violence: 0.001, hate: 0.0001 },
        },
      ],
    });
  };

  const answerSpeech = async (res: ServerResponse): Promise<void> => {
    res.writeHead(200, { "content-type": "audio/mpeg" });
    // In pieces, as a synthesiser streams its audio.
    for (let at = 0; at < FAKE_SPEECH.length; at += 16 * 1024) {
      res.write(FAKE_SPEECH.subarray(at, at + 16 * 1024));
      if (!(await pause(res, 5))) return;
    }
    res.end();
  };

  const answerTranscription = (
    res: ServerResponse,
    route: FakeRoute,
    form: RecordedForm | undefined,
  ): void => {
    const said = `${route === "translations" ? "translated" : "transcribed"} by ${name}`;
    if (form?.fields.response_format === "text") {
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
      res.end(said);
      return;
    }
    sendJson(res, 200, {
      text: said,
      ...(route === "transcriptions"
        ? { usage: { type: "tokens", input_tokens: 11, output_tokens: 3, total_tokens: 14 } }
        : {}),
    });
  };

  const answerEcho = async (
    res: ServerResponse,
    req: IncomingMessage,
    body: Record<string, unknown>,
    behavior: Extract<Behavior, { kind: "echo-key" }>,
  ): Promise<void> => {
    const key = String(req.headers.authorization ?? "").replace(/^Bearer /, "");
    const spellings = keySpellings(key);
    const status = behavior.status ?? 200;
    const headers: Record<string, string> = {
      "x-request-id": `req_${key}`,
      "x-ratelimit-remaining-requests": spellings[2] as string,
      "x-echo-authorization": `Bearer ${key}`,
      "openai-organization": `org-${key}`,
      "set-cookie": `session=${key}`,
    };
    if (status === 200 && body.stream === true) {
      res.writeHead(200, { ...headers, "content-type": "text/event-stream" });
      for (const spelling of spellings) {
        // The key split across two writes: a scrubber must see it whole.
        const event = `data: {"echo":"${spelling}"}\n\n`;
        const cut = event.indexOf(spelling) + Math.floor(spelling.length / 2);
        res.write(event.slice(0, cut));
        if (!(await pause(res, 10))) return;
        res.write(event.slice(cut));
        if (!(await pause(res, 10))) return;
      }
      res.end("data: [DONE]\n\n");
      return;
    }
    const json =
      status === 200
        ? `{"id":"echo","object":"chat.completion","model":"echo","echo":[${spellings
            .map((s) => `"${s}"`)
            .join(",")}],"choices":[]}`
        : `{"error":{"message":"bad key ${spellings.join(" ")}","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`;
    let payload: Buffer = Buffer.from(json);
    if (behavior.encoding === "gzip") payload = gzipSync(payload);
    if (behavior.encoding === "br") payload = brotliCompressSync(payload);
    if (behavior.encoding === "deflate") payload = deflateSync(payload);
    res.writeHead(status, {
      ...headers,
      "content-type": "application/json",
      "content-length": payload.length,
      ...(behavior.encoding ? { "content-encoding": behavior.encoding } : {}),
    });
    res.end(payload);
  };

  const answerModels = (res: ServerResponse, pathname: string): void => {
    const model = (id: string): unknown => ({
      id,
      object: "model",
      created: 1_700_000_000,
      owned_by: name,
    });
    const one = /^\/v1\/models\/([^/]+)$/.exec(pathname);
    if (!one) {
      sendJson(res, 200, { object: "list", data: models.map(model) });
      return;
    }
    const id = decodeURIComponent(one[1]!);
    if (models.includes(id)) sendJson(res, 200, model(id));
    else
      sendJson(
        res,
        404,
        errorEnvelope(
          `The model '${id}' does not exist`,
          "invalid_request_error",
          "model_not_found",
        ),
      );
  };

  /** A half-sent answer for the failure behaviours, in the route's own content type. */
  const halfAnswer = (route: FakeRoute) =>
    route === "speech"
      ? { type: "audio/mpeg", body: FAKE_SPEECH }
      : {
          type: "application/json",
          body: Buffer.from(JSON.stringify({ id: "half", object: "x", data: "y".repeat(4000) })),
        };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const method = req.method ?? "GET";
    const pathname = new URL(req.url ?? "/", "http://fake.invalid").pathname;
    const route = routeOf(method, pathname);
    let serverDestroyed = false;
    const arrivedIn = epoch;

    const generating = route === "images" || route === "edits";
    if (generating) {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
    }
    res.once("close", () => {
      if (arrivedIn !== epoch) return;
      if (generating) inFlight--;
      if (!res.writableFinished && !serverDestroyed && !closing) aborted++;
    });
    res.setHeader("x-fake-upstream", name);

    const raw = await readRaw(req);
    const contentType = String(req.headers["content-type"] ?? "");
    const form = contentType.startsWith("multipart/form-data")
      ? parseForm(contentType, raw)
      : undefined;
    let body: unknown;
    const textBody = raw.toString("utf8");
    if (form) body = form.fields;
    else if (raw.length > 0) {
      try {
        body = JSON.parse(textBody) as unknown;
      } catch {
        body = textBody;
      }
    }
    const parts = form ? await readParts(req.headers, raw) : undefined;
    const recorded: RecordedRequest = {
      method,
      path: req.url ?? "/",
      headers: req.headers,
      body,
      raw,
      ...(form ? { form } : raw.length > 0 ? { model: modelReadings(textBody) } : {}),
      ...(parts ? { parts } : {}),
    };
    requests.push(recorded);
    const prompt = (recorded.body as { prompt?: unknown } | undefined)?.prompt;
    if (generating && typeof prompt === "string" && arrivedIn === epoch && !res.destroyed) {
      const now = (inFlightByPrompt.get(prompt) ?? 0) + 1;
      inFlightByPrompt.set(prompt, now);
      maxInFlightPerPrompt = Math.max(maxInFlightPerPrompt, now);
      res.once("close", () => {
        if (arrivedIn !== epoch) return;
        inFlightByPrompt.set(prompt, (inFlightByPrompt.get(prompt) ?? 1) - 1);
      });
    }
    if (route) {
      const pending = waiters.get(route) ?? [];
      waiters.delete(route);
      for (const resolve of pending) resolve(recorded);
    }

    const extra = extraRoutes.get(pathname);
    if (!route && extra) {
      await extra(req, res, recorded.body);
      return;
    }
    if (!route) {
      sendJson(
        res,
        404,
        errorEnvelope(`Unknown route: ${method} ${pathname}`, "invalid_request_error", "not_found"),
      );
      return;
    }

    const fields = (typeof body === "object" && body !== null ? body : {}) as Record<
      string,
      unknown
    >;
    const behavior = behaviors.get(route) ?? { kind: "ok" };
    switch (behavior.kind) {
      case "hang":
        return;
      case "reset":
        serverDestroyed = true;
        req.socket.destroy();
        return;
      case "garbage": {
        const payload = "<html>this is not JSON";
        res.writeHead(200, {
          "content-type": "application/json",
          "content-length": payload.length,
        });
        res.end(payload);
        return;
      }
      case "cut": {
        const half = halfAnswer(route);
        res.writeHead(200, { "content-type": half.type, "content-length": half.body.length });
        res.write(half.body.subarray(0, half.body.length >> 1));
        await pause(res, 20);
        serverDestroyed = true;
        req.socket.destroy();
        return;
      }
      case "truncated": {
        const half = halfAnswer(route);
        res.writeHead(200, { "content-type": half.type });
        res.end(half.body.subarray(0, half.body.length >> 1));
        return;
      }
      case "stall":
        if (fields.stream === true) {
          res.writeHead(200, { "content-type": "text/event-stream" });
          res.write(
            `data: ${JSON.stringify({ id: "stalled", object: "chat.completion.chunk", created: now(), model: fields.model, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] })}\n\n`,
          );
        } else {
          res.writeHead(200, { "content-type": halfAnswer(route).type });
          res.flushHeaders();
        }
        return;
      case "redirect":
        res.writeHead(behavior.status ?? 307, { location: behavior.location });
        res.end();
        return;
      case "echo-key":
        await answerEcho(res, req, fields, behavior);
        return;
      case "status":
        sendJson(
          res,
          behavior.status,
          behavior.body ??
            errorEnvelope(
              `fake upstream answered ${behavior.status}`,
              behavior.status >= 500 ? "server_error" : "invalid_request_error",
              behavior.status >= 500 ? "upstream_error" : "bad_request",
            ),
        );
        return;
      case "custom":
        await behavior.respond(req, res, recorded.body);
        return;
      case "ok":
        if (behavior.delayMs && !(await pause(res, behavior.delayMs))) return;
        switch (route) {
          case "chat":
            return answerChat(res, fields);
          case "images":
          case "edits":
          case "variations":
            return answerImages(res, fields);
          case "responses":
            return answerResponses(res, fields);
          case "stored-response":
            return answerStoredResponse(res, method, pathname);
          case "embeddings":
            return answerEmbeddings(res, fields);
          case "completions":
            return answerCompletions(res, fields);
          case "moderations":
            return answerModerations(res, fields);
          case "speech":
            return answerSpeech(res);
          case "transcriptions":
          case "translations":
            return answerTranscription(res, route, form);
          case "models":
            return answerModels(res, pathname);
        }
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      // The client aborted mid-body (the read throws); nothing left to answer.
      res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  let closed: Promise<void> | undefined;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    origin: `http://127.0.0.1:${port}`,
    requests,
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    get maxInFlightPerPrompt() {
      return maxInFlightPerPrompt;
    },
    get aborted() {
      return aborted;
    },
    behave(route, behavior) {
      behaviors.set(route, behavior);
    },
    serve(pathname, handler) {
      extraRoutes.set(pathname, handler);
    },
    holdStreams() {
      held = true;
    },
    release,
    nextRequest(route) {
      return new Promise((resolve) => {
        const list = waiters.get(route) ?? [];
        list.push(resolve);
        waiters.set(route, list);
      });
    },
    reset() {
      behaviors.clear();
      release();
      requests.length = 0;
      epoch++;
      inFlight = 0;
      maxInFlight = 0;
      inFlightByPrompt.clear();
      maxInFlightPerPrompt = 0;
      aborted = 0;
    },
    close() {
      closed ??= new Promise<void>((resolve, reject) => {
        closing = true;
        release();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
