import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import type { ModelReadings } from "./json-readings.js";

/** How a route answers. */
export type Behavior =
  /** Normal answer, after an optional delay. */
  | { kind: "ok"; delayMs?: number }
  /** Accept the request and never answer, until the client aborts or the fake closes. */
  | { kind: "hang" }
  /** Answer `status` with `body` as JSON (default: an OpenAI error envelope). */
  | { kind: "status"; status: number; body?: unknown }
  /** Read the whole request, then destroy the socket without answering. */
  | { kind: "reset" }
  /**
   * Destroy the socket as soon as the request's head arrived, before reading its body: with
   * a body larger than the sockets' buffers, the client is still writing it.
   */
  | { kind: "reset-early" }
  /** 200 with a valid JSON answer (an SSE stream when the request asked for one) of `bytes`. */
  | { kind: "large"; bytes: number }
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
  /** False for a request whose body the fake never read (`reset-early`). */
  complete: boolean;
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
  /** Every request, in order of arrival (recorded once its body is read), but the checks. */
  requests: RecordedRequest[];
  /**
   * The service's own model-list checks (start-up, periodic: `User-Agent: ... (model-list
   * check)`), kept apart from `requests` and never answering `nextRequest`.
   */
  checks: RecordedRequest[];
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
