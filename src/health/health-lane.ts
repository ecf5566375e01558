import type { Lane } from "../http/lane.js";
import { createRouteTable } from "../http/route-table.js";
import { sendJson } from "../http/send-json.js";
import { readiness, type ReadinessDeps } from "./readiness.js";

/** Seconds a probe that found the service unready is told to wait. */
const RETRY_AFTER_SEC = 5;

const ROUTES = [
  { method: "GET", template: "/healthz" },
  { method: "GET", template: "/readyz" },
] as const;

/**
 * `GET /healthz` (the process answers) and `GET /readyz` (see
 * {@link readiness}: what the periodic checks last found, never a call to a
 * store or a channel), without auth, for probes.
 */
export function createHealthLane(deps: ReadinessDeps): Lane {
  const table = createRouteTable(ROUTES);
  return {
    match(method, path) {
      const hit = table(method, path);
      if (!hit) return undefined;
      if (hit.route.template === "/healthz") {
        return {
          template: "/healthz",
          auth: false,
          serve: ({ res }) => sendJson(res, 200, { status: "ok" }),
        };
      }
      return {
        template: "/readyz",
        auth: false,
        serve({ res }) {
          const { status, body } = readiness(deps);
          const headers: Record<string, string> =
            status === 200 ? {} : { "Retry-After": String(RETRY_AFTER_SEC) };
          sendJson(res, status, body, headers);
        },
      };
    },
  };
}
