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

/** Dependencies of {@link createHealthLane}. */
export type HealthLaneDeps = Omit<ReadinessDeps, "details"> & {
  /** On Redis: which node is the primary and the last switch, shown in the ready answer. */
  redis?: (() => RedisReadiness) | undefined;
};

/**
 * `GET /healthz` (the process answers) and `GET /readyz` (see
 * {@link readiness}), without auth, for probes.
 */
export function createHealthLane(deps: HealthLaneDeps): Lane {
  const table = createRouteTable(ROUTES);
  const { redis } = deps;
  const ready: ReadinessDeps = {
    ...deps,
    ...(redis ? { details: () => ({ redis: redisField(redis()) }) } : {}),
  };
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
        async serve({ res }) {
          const { status, body } = await readiness(ready);
          sendJson(
            res,
            status,
            body,
            status === 200 ? {} : { "Retry-After": String(RETRY_AFTER_SEC) },
          );
        },
      };
    },
  };
}

/** What `/readyz` shows of Redis (see `redis/redis-primary.ts`). */
export interface RedisReadiness {
  mode: string;
  primary: string[];
  switches: number;
  switchedAt: Date | undefined;
}

function redisField(status: RedisReadiness) {
  return {
    mode: status.mode,
    primary: status.primary,
    switches: status.switches,
    lastSwitchAt: status.switchedAt?.toISOString() ?? null,
  };
}
