import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import type { Logger } from "pino";
import {
  authenticateHeader,
  bearerToken,
  type Authenticate,
} from "../auth/create-authenticator.js";
import type { Principal } from "../auth/principal.js";
import type { Lane, LaneCall, LaneMatch } from "../http/lane.js";
import { sendError } from "../http/send-error.js";
import type { RequestContext } from "../observability/request-context.js";
import type { Cors } from "./cors.js";
import { notFoundMatch } from "./not-found.js";

/** Dependencies of {@link createPipeline}. */
export interface PipelineDeps {
  /** Asked in order; the first whose table has the route serves it. */
  lanes: readonly Lane[];
  authenticate: Authenticate;
  /** Makes each request's context, and reports it when the answer ends (see `createRequestObserver`). */
  observe: (req: IncomingMessage, res: ServerResponse) => RequestContext;
  /** Browser pages of other origins (`server.corsOrigins`); undefined: none. */
  cors?: Cors | undefined;
  logger: Logger;
}

/**
 * The one way in for every request: the edge makes the request's context,
 * answers a browser's CORS preflight on an API route (`cors.ts`), finds the
 * lane whose table has the route (else the 404 `not_found`), authenticates
 * the bearer before any byte of the body is read where the route asks for
 * it, lets the lane answer, and writes whatever it throws (or reports later
 * through `fail`) as the OpenAI error envelope, recording the code in the
 * context. No router framework runs per request: matching is a
 * table lookup per lane, which keeps the passthrough close to a bare pipe.
 */
export function createPipeline(deps: PipelineDeps): RequestListener {
  const { lanes } = deps;
  return (req, res) => {
    const context = deps.observe(req, res);
    // Every answer, JSON or not: no browser sniffs a type into one.
    res.setHeader("X-Content-Type-Options", "nosniff");
    const url = req.url ?? "/";
    const mark = url.indexOf("?");
    const path = mark === -1 ? url : url.slice(0, mark);
    if (deps.cors?.(req, res, path)) {
      context.route = "preflight";
      return;
    }
    const method = req.method ?? "GET";
    let match: LaneMatch | undefined;
    for (let index = 0; index < lanes.length && !match; index += 1) {
      match = (lanes[index] as Lane).match(method, path);
    }
    if (match) context.route = match.template;
    serve(deps, match ?? notFoundMatch(path), {
      req,
      res,
      context,
      principal: undefined,
      query: mark === -1 ? "" : url.slice(mark + 1),
      fail: (err) => {
        context.errorCode = sendError(req, res, err, deps.logger);
      },
    });
  };
}

/** Authenticates where the route asks for it, then lets the lane answer; failures go to `fail`. */
function serve(deps: PipelineDeps, match: LaneMatch, call: LaneCall): void {
  if (!match.auth) {
    answer(match, call);
    return;
  }
  const { authorization } = call.req.headers;
  const token = deps.authenticate.configured ? bearerToken(authorization) : undefined;
  const known = token === undefined ? undefined : deps.authenticate.configured?.(token);
  if (known) {
    // A configured key: no promise to wait for. The lane still answers in a microtask, as
    // after an authenticator's promise: by then a body that came with the headers is parsed.
    queueMicrotask(() => {
      noteCaller(call.context, known);
      call.principal = known;
      answer(match, call);
    });
    return;
  }
  authenticateHeader(deps.authenticate, authorization, call.req)
    .then((principal) => {
      noteCaller(call.context, principal);
      call.principal = principal;
      return match.serve(call);
    })
    .catch(call.fail);
}

/** Lets the lane answer; what it throws or rejects with goes to `fail`. */
function answer(match: LaneMatch, call: LaneCall): void {
  try {
    const answered = match.serve(call);
    if (answered) answered.catch(call.fail);
  } catch (err) {
    call.fail(err);
  }
}

/** Who the caller is, for the access line, metrics and spans. */
function noteCaller(context: RequestContext, principal: Principal): void {
  context.keyName = principal.keyName;
  context.group = principal.group;
}
