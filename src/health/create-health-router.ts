import { Router } from "express";
import { readiness, type ReadinessDeps } from "./readiness.js";

/** Seconds a probe that found the service unready is told to wait. */
const RETRY_AFTER_SEC = 5;

/**
 * `GET /healthz` (the process answers) and `GET /readyz` (the task store and
 * the image store work, and the service is not shutting down: see
 * {@link readiness}), without auth, for probes.
 */
export function createHealthRouter(
  deps: Omit<ReadinessDeps, "details"> & {
    /** On Redis: which node is the primary and the last switch, shown in the ready answer. */
    redis?: (() => RedisReadiness) | undefined;
  },
): Router {
  const router = Router();
  const { redis } = deps;
  const ready: ReadinessDeps = {
    ...deps,
    ...(redis ? { details: () => ({ redis: redisField(redis()) }) } : {}),
  };
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const { status, body } = await readiness(ready);
    if (status !== 200) res.setHeader("retry-after", String(RETRY_AFTER_SEC));
    res.status(status).json(body);
  });
  return router;
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
