import type { Span, Tracer } from "../tracing/tracer.js";

/**
 * What one HTTP request did, as its access line, its metrics and its server
 * span report it: made at the edge for every request, filled in by whoever
 * learns a part (the lane that matched the route, the authentication, the
 * passthrough and its channel tries, the error writer).
 */
export interface RequestContext {
  /** `X-Request-Id`: the client's when sane, else made here; answered and sent on. */
  readonly reqId: string;
  /** The route's template (`/v1/images/tasks/:taskId`), once a lane matched it. */
  route: string | undefined;
  /** The caller, once authenticated: its `key_name` (never a key) and group. */
  keyName: string | undefined;
  group: string | undefined;
  /** The model the request named, where it names one. */
  model: string | undefined;
  /** The task the request is about (a task route's id, or the task a submission made). */
  taskId: string | undefined;
  /** The channel that answered last, its status, and how many channels were tried. */
  channel: string | undefined;
  upstreamStatus: number | undefined;
  tries: number;
  /** The code of an error answer the service wrote itself. */
  errorCode: string | undefined;
  /** The request's server span (a no-op when tracing is off). */
  readonly span: Span;
  /** Makes the request's other spans (channel tries, a task's). */
  readonly tracer: Tracer;
}
