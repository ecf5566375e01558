import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseQuery, type ParsedUrlQuery } from "node:querystring";
import type { Principal } from "../../auth/principal.js";
import { ServiceError } from "../../errors/service-error.js";
import { callerOf, type LaneCall } from "../../http/lane.js";
import { publicBaseUrl, type PublicOrigin } from "../../http/public-base-url.js";
import { decodeSegment } from "../../http/route-table.js";
import type { RequestContext } from "../../observability/request-context.js";

/** One authenticated request to a task route (of any dialect). */
export interface TaskRequest {
  req: IncomingMessage;
  res: ServerResponse;
  principal: Principal;
  /** The `:taskId` of the route, decoded. */
  taskId: string;
  /** The request's context: its model, its span (a task's trace starts at its submission). */
  context: RequestContext;
  query: ParsedUrlQuery;
  /**
   * The origin of the request's image URLs and `Location` (see
   * `publicBaseUrl`), asked when the answer needs it, so a bad Host fails at
   * the same step on every route.
   */
  baseUrlOf: () => string;
}

/**
 * A call to a task route as its handler reads it: its caller, its decoded
 * `:taskId` (the route's first param), its query (as `node:querystring`
 * reads it) and the origin of the URLs it hands out.
 */
export function taskRequest(
  call: LaneCall,
  params: readonly string[],
  origin: PublicOrigin,
): TaskRequest {
  const { req, res, context, query } = call;
  const raw = params[0];
  const taskId = raw === undefined ? "" : decodeSegment(raw);
  if (taskId === undefined)
    throw new ServiceError("invalid_value", "The request could not be read.");
  return {
    req,
    res,
    principal: callerOf(call),
    taskId,
    query: query === "" ? {} : parseQuery(query),
    baseUrlOf: () => publicBaseUrl(req, origin),
    context,
  };
}

/** Sets each of `headers` on `res`. */
export function setHeaders(res: ServerResponse, headers: Record<string, string>): void {
  for (const name in headers) res.setHeader(name, headers[name] as string);
}
