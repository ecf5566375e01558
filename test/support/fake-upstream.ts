import { randomBytes } from "node:crypto";
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import busboy from "busboy";
import { encodePng } from "../../src/demo/png-encoder.js";

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
  /** The test answers itself: huge, endless or odd answers. */
  | { kind: "custom"; respond: RouteHandler };

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
  /**
   * Parsed JSON, the raw string if not JSON, `undefined` if the body was empty. An image edit
   * (multipart): its text fields as an object.
   */
  body: unknown;
  /** An image edit's `multipart/form-data` parts, in order, files byte for byte. */
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

export type FakeRoute = "chat" | "images" | "models" | "edits";

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
   * Streaming chat sends its first chunks, then waits for release() before the rest and
   * `[DONE]`; lets a test prove chunks reach the client before the upstream finished.
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

function routeOf(method: string, pathname: string): FakeRoute | undefined {
  if (method === "POST" && pathname === "/v1/chat/completions") return "chat";
  if (method === "POST" && pathname === "/v1/images/generations") return "images";
  if (method === "POST" && pathname === "/v1/images/edits") return "edits";
  if (method === "GET" && /^\/v1\/models(\/[^/]+)?$/.test(pathname)) return "models";
  return undefined;
}

/** Parts of a `multipart/form-data` body, read with busboy; undefined when it is not one. */
async function readParts(req: IncomingMessage): Promise<MultipartPart[] | undefined> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  const parts: MultipartPart[] = [];
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers: req.headers });
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
  Readable.from([Buffer.concat(chunks)]).pipe(parser);
  await done;
  await Promise.all(files);
  return parts;
}

function errorEnvelope(message: string, type: string, code: string | null): unknown {
  return { error: { message, type, param: null, code } };
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

  const readBody = async (req: IncomingMessage): Promise<unknown> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const text = Buffer.concat(chunks).toString("utf8");
    if (text.length === 0) return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
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

  const answerChat = async (res: ServerResponse, body: unknown): Promise<void> => {
    const request = (typeof body === "object" && body !== null ? body : {}) as {
      model?: unknown;
      stream?: unknown;
    };
    const model = typeof request.model === "string" ? request.model : "unknown";
    const id = `chatcmpl-fake${randomBytes(8).toString("hex")}`;
    const created = Math.floor(Date.now() / 1000);
    const words = ["Hello ", "from ", `${name}`, "!"];
    const usage = {
      prompt_tokens: 5,
      completion_tokens: words.length,
      total_tokens: 5 + words.length,
    };

    if (request.stream !== true) {
      sendJson(res, 200, {
        id,
        object: "chat.completion",
        created,
        model,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: words.join(""), refusal: null },
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
    if (held) {
      const gone = new Promise<void>((resolve) => res.once("close", resolve));
      await Promise.race([waitForRelease(), gone]);
      if (res.destroyed) return;
    }
    for (const word of words.slice(1)) res.write(chunk({ content: word }));
    res.write(chunk({}, "stop"));
    res.end("data: [DONE]\n\n");
  };

  const answerImages = (res: ServerResponse, body: unknown): void => {
    const requested = (body as { n?: unknown } | undefined)?.n;
    const n = typeof requested === "number" ? Math.min(10, Math.max(1, Math.floor(requested))) : 1;
    sendJson(res, 200, {
      created: Math.floor(Date.now() / 1000),
      data: Array.from({ length: n }, () => ({ b64_json: TINY_PNG_B64 })),
      usage: {
        input_tokens: 10,
        input_tokens_details: { text_tokens: 10, image_tokens: 0 },
        output_tokens: 100 * n,
        total_tokens: 10 + 100 * n,
      },
    });
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

    const parts = route === "edits" ? await readParts(req) : undefined;
    const recorded: RecordedRequest = {
      method,
      path: req.url ?? "/",
      headers: req.headers,
      body: parts
        ? Object.fromEntries(
            parts.filter((part) => !part.filename).map((p) => [p.name, p.data.toString()]),
          )
        : await readBody(req),
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
        if (route === "chat") await answerChat(res, recorded.body);
        else if (route === "images") answerImages(res, recorded.body);
        else if (route === "edits") {
          const n = Number((recorded.body as { n?: string } | undefined)?.n ?? 1);
          answerImages(res, { n });
        } else answerModels(res, pathname);
        return;
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
