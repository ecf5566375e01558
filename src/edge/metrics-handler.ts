import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import { ServiceError } from "../errors/service-error.js";
import { sendError } from "../http/send-error.js";
import type { Metrics } from "../metrics/create-metrics.js";

/** Answers one `GET /metrics` on a plain Node request, on whichever listener serves it. */
export type MetricsHandler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The Prometheus text, behind `metrics.bearerToken` when one is configured.
 * Refusals are the service's usual 401 envelopes (`missing_api_key`,
 * `invalid_api_key`) with `WWW-Authenticate: Bearer`.
 */
export function createMetricsHandler(
  metrics: Metrics,
  config: Config["metrics"],
  logger: Logger,
): MetricsHandler {
  const authorized = createBearerCheck(config.bearerToken);
  return (req, res) => {
    try {
      authorized(req.headers.authorization);
    } catch (err) {
      // A refusal asks for the token this way.
      res.setHeader("WWW-Authenticate", 'Bearer realm="metrics"');
      sendError(req, res, err, logger);
      return;
    }
    void (async () => {
      const text = await metrics.registry.metrics();
      res.writeHead(200, {
        "content-type": metrics.registry.contentType,
        "content-length": Buffer.byteLength(text),
        "cache-control": "no-store",
      });
      res.end(req.method === "HEAD" ? undefined : text);
    })().catch((err: unknown) => sendError(req, res, err, logger));
  };
}

/** A check of `Authorization: Bearer <token>` that throws the 401s; a no-op without a token. */
function createBearerCheck(token: string | undefined): (header: string | undefined) => void {
  if (token === undefined) return () => {};
  const expected = digest(token);
  return (header) => {
    const given = header ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] : undefined;
    if (!header) {
      throw new ServiceError("missing_api_key", "/metrics needs 'Authorization: Bearer <token>'.");
    }
    // Fail closed: an empty token (an unset ${VAR}) matches nothing. Hashes have one length,
    // so the comparison takes the same time whatever was sent.
    if (token === "" || given === undefined || !timingSafeEqual(digest(given), expected)) {
      throw new ServiceError("invalid_api_key", "Incorrect bearer token for /metrics.");
    }
  };
}

function digest(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}
