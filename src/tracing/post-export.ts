import { Agent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";

/** How an export request ended. */
export type PostOutcome =
  { ok: true } | { ok: false; retryable: boolean; reason: string; retryAfterMs?: number };

/** Posts export bodies to one OTLP/HTTP endpoint. */
export interface ExportPoster {
  post(body: Buffer, timeoutMs: number): Promise<PostOutcome>;
  /** Drops requests in flight and the kept connections. */
  close(): void;
}

/** What a collector answers when it may take the same batch later (OTLP/HTTP's retryable statuses). */
const RETRYABLE = new Set([429, 502, 503, 504]);

/**
 * A poster on node:http(s) with a connection kept alive between batches
 * (one at a time), the configured headers, and a deadline per request.
 */
export function createExportPoster(
  endpoint: string,
  contentType: string,
  headers: Record<string, string>,
): ExportPoster {
  const url = new URL(endpoint);
  const https = url.protocol === "https:";
  const agent = https
    ? new HttpsAgent({ keepAlive: true, maxSockets: 1 })
    : new Agent({ keepAlive: true, maxSockets: 1 });
  const request = https ? httpsRequest : httpRequest;
  const inFlight = new Set<{ destroy(): void }>();
  let closed = false;
  return {
    post(body, timeoutMs) {
      if (closed) return Promise.resolve({ ok: false, retryable: false, reason: "stopped" });
      return new Promise((resolve) => {
        const req = request(url, {
          method: "POST",
          agent,
          headers: { ...headers, "content-type": contentType, "content-length": body.length },
        });
        inFlight.add(req);
        const timer = setTimeout(() => req.destroy(new Error("timed out")), timeoutMs);
        let settled = false;
        const settle = (outcome: PostOutcome) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          inFlight.delete(req);
          resolve(outcome);
        };
        req.on("response", (res) => {
          res.resume();
          const status = res.statusCode ?? 0;
          res.on("end", () => settle(outcomeOf(status, res.headers["retry-after"])));
          res.on("error", (error) => settle(failed(error)));
        });
        req.on("error", (error) => settle(failed(error)));
        req.end(body);
      });
    },
    close() {
      closed = true;
      for (const req of inFlight) req.destroy();
      agent.destroy();
    },
  };
}

function outcomeOf(status: number, retryAfter: string | undefined): PostOutcome {
  if (status >= 200 && status < 300) return { ok: true };
  const seconds = Number(retryAfter);
  return {
    ok: false,
    retryable: RETRYABLE.has(status),
    reason: `status ${status}`,
    ...(seconds > 0 ? { retryAfterMs: seconds * 1000 } : {}),
  };
}

/** A request that never got an answer: the collector is down, unreachable or too slow. */
function failed(error: Error & { code?: string }): PostOutcome {
  return { ok: false, retryable: true, reason: error.code ?? error.message };
}
