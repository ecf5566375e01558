import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import { authenticateHeader, type Authenticate } from "../auth/create-authenticator.js";
import { sendError } from "../http/send-error.js";
import { noteCaller, type RequestContext } from "../observability/request-context.js";
import type { Passthrough } from "./create-passthrough-handler.js";
import { matchPassthroughRoute } from "./passthrough-routes.js";

/** Dependencies of {@link createProxyLane}. */
export interface ProxyLaneDeps {
  authenticate: Authenticate;
  passthrough: Passthrough;
  logger: Logger;
}

/**
 * The proxied routes, served beside Express rather than through it: Express's
 * per-request work (prototype swaps, the router's layer walk) cost more CPU
 * than the whole of a bare `node:http` pipe, on the path that must cost
 * little more than one. The lane keeps the same steps and the same one error
 * path: the route for metrics and logs, bearer auth (before any byte of the body is read), then the
 * passthrough; every failure goes through {@link sendError}.
 * Returns false for any other request, which then goes to Express.
 */
export function createProxyLane(
  deps: ProxyLaneDeps,
): (req: IncomingMessage, res: ServerResponse, context: RequestContext) => boolean {
  return (req, res, context) => {
    if (!req.url || !req.method) return false;
    const query = req.url.indexOf("?");
    let path = query === -1 ? req.url : req.url.slice(0, query);
    if (path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);
    const match = matchPassthroughRoute(req.method, path);
    if (!match) return false;

    context.route = match.route.template;
    const fail = (err: unknown) => sendError(req, res, err, deps.logger);
    void (async () => {
      const principal = await authenticateHeader(deps.authenticate, req.headers.authorization, req);
      noteCaller(res, principal);
      await deps.passthrough(match, req, res, principal, fail, context);
    })().catch(fail);
    return true;
  };
}
