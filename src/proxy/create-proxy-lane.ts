import type { IncomingMessage, ServerResponse } from "node:http";
import type { RequestHandler } from "express";
import type { Logger } from "pino";
import { authenticateHeader, type Authenticate } from "../auth/create-authenticator.js";
import { sendError } from "../http/error-middleware.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { observeHttpRequest } from "../metrics/create-metrics-router.js";
import type { ParsedRequest, PassthroughHandler } from "./create-passthrough-handler.js";

/** Dependencies of {@link createProxyLane}. */
export interface ProxyLaneDeps {
  authenticate: Authenticate;
  /** Parses the JSON body (body-parser, which needs no Express). */
  jsonBody: RequestHandler;
  metrics: Metrics;
  logger: Logger;
  /** `POST` paths served by the lane, e.g. `/v1/chat/completions`. */
  routes: Record<string, PassthroughHandler>;
}

/**
 * The proxied routes, served beside Express rather than through it: Express's
 * per-request work (prototype swaps, the router's layer walk) cost more CPU
 * than the whole of a bare `node:http` pipe, on the path that must cost
 * little more than one. The lane keeps the same steps and the same one error
 * path: metrics, bearer auth, JSON body, then the http-proxy-middleware
 * handler; every failure goes through {@link sendError}.
 * Returns false for any other request, which then goes to Express.
 */
export function createProxyLane(
  deps: ProxyLaneDeps,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const readBody = (req: IncomingMessage, res: ServerResponse) =>
    new Promise<void>((resolve, reject) => {
      const next = (err?: unknown) => (err ? reject(err) : resolve());
      (deps.jsonBody as unknown as (...args: unknown[]) => void)(req, res, next);
    });

  return (req, res) => {
    if (req.method !== "POST" || !req.url) return false;
    const query = req.url.indexOf("?");
    let path = query === -1 ? req.url : req.url.slice(0, query);
    if (path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);
    const handler = deps.routes[path];
    if (!handler) return false;

    observeHttpRequest(deps.metrics, req, res, () => path);
    const fail = (err: unknown) => sendError(req, res, err, deps.logger);
    void (async () => {
      const principal = await authenticateHeader(deps.authenticate, req.headers.authorization);
      await readBody(req, res);
      await handler(req as ParsedRequest, res, principal, fail);
    })().catch(fail);
    return true;
  };
}
