import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../auth/principal.js";
import { ServiceError } from "../errors/service-error.js";
import type { RequestContext } from "../observability/request-context.js";

/**
 * One request as a lane serves it, once the edge matched its route, made its
 * context and (for a route behind auth) authenticated its caller.
 */
export interface LaneCall {
  req: IncomingMessage;
  res: ServerResponse;
  /** The request's context: whoever learns a part of what it did writes it here. */
  context: RequestContext;
  /** The caller, on a route behind bearer auth; see {@link callerOf}. */
  principal: Principal | undefined;
  /** The query string, without its `?` ("" when there is none). */
  query: string;
  /**
   * Answers an error that comes after `serve` settled (a stream that fails
   * later): the edge's one error writer. Errors `serve` throws go there too.
   */
  fail(err: unknown): void;
}

/** A request matched to one of a lane's routes. */
export interface LaneMatch {
  /** The route's template, as metrics and logs name it (never a raw id). */
  readonly template: string;
  /** Whether the edge authenticates the bearer (before any byte of the body is read). */
  readonly auth: boolean;
  /** Answers the request; what it throws is answered as the OpenAI error envelope. */
  serve(call: LaneCall): Promise<void> | void;
}

/**
 * A family of routes served together (the passthrough, the task API, the
 * health probes, ...). The edge asks each lane in turn; the first that
 * matches serves the request. Adding a route is adding it to one lane's table.
 */
export interface Lane {
  /** The route `method` and `path` (no query) name, or undefined when it is not one of this lane's. */
  match(method: string, path: string): LaneMatch | undefined;
}

/**
 * The caller of a route behind auth.
 * @throws ServiceError `missing_api_key` when the route was served without auth (a bug)
 */
export function callerOf(call: LaneCall): Principal {
  if (!call.principal) {
    throw new ServiceError("missing_api_key", "You didn't provide an API key.");
  }
  return call.principal;
}
