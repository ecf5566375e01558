import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import { authenticateHeader, type Authenticate } from "../auth/create-authenticator.js";
import { sendError } from "../http/send-error.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { observeHttpRequest } from "../metrics/create-metrics-router.js";
import type { Passthrough } from "./create-passthrough-handler.js";
import { matchPassthroughRoute } from "./passthrough-routes.js";

/** Dependencies of {@link createProxyLane}. */
export interface ProxyLaneDeps {
  authenticate: Authenticate;
  passthrough: Passthrough;
  metrics: Metrics;
  logger: Logger;
}

/**
 * The proxied routes, served beside Express rather than through it: Express's
 * per-request work (prototype swaps, the router's layer walk) cost more CPU
 * than the whole of a bare `node:http` pipe, on the path that must cost
 * little more than one. The lane keeps the same steps and the same one error
 * path: metrics, bearer auth (before any byte of the body is read), then the
 * passthrough; every failure goes through {@link sendError}.
 * Returns false for any other request, which then goes to Express.
 */
export function createProxyLane(
  deps: ProxyLaneDeps,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    if (!req.url || !req.method) return false;
    const query = req.url.indexOf("?");
    let path = query === -1 ? req.url : req.url.slice(0, query);
    if (path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);
    const match = matchPassthroughRoute(req.method, path);
    if (!match) return false;

    observeHttpRequest(deps.metrics, req, res, () => match.route.template);
    const fail = (err: unknown) => sendError(req, res, err, deps.logger);
    void (async () => {
      const principal = await authenticateHeader(deps.authenticate, req.headers.authorization, req);
      await deps.passthrough(match, req, res, principal, fail);
    })().catch(fail);
    return true;
  };
}
