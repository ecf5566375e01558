import { Router } from "express";
import { ServiceError } from "../errors/service-error.js";
import type { Metrics } from "../metrics/create-metrics.js";

/**
 * `GET /healthz` (the process answers) and `GET /readyz` (the task store and
 * the image store answer, and the service is not shutting down), without
 * auth, for probes.
 */
export function createHealthRouter(deps: {
  /**
   * Rejects when the task store or the image store cannot be reached (an
   * ServiceError says which; anything else is the task store).
   */
  ping: () => Promise<void>;
  isStopping: () => boolean;
  /** Set from each check: the kubelet's probes keep it fresh for alerts. */
  storeUp?: Metrics["storeUp"];
  /** On Redis: which node is the primary and the last switch, shown in the ready answer. */
  redis?: () => RedisReadiness;
}): Router {
  const router = Router();
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    if (deps.isStopping())
      throw new ServiceError("service_unavailable", "The service is shutting down.");
    try {
      await deps.ping();
    } catch (err) {
      const error =
        err instanceof ServiceError
          ? err
          : new ServiceError("store_unavailable", "The task store cannot be reached.");
      recordStores(deps.storeUp, error.code);
      throw error;
    }
    recordStores(deps.storeUp, undefined);
    res.json(
      deps.redis ? { status: "ready", redis: redisField(deps.redis()) } : { status: "ready" },
    );
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

/**
 * The ping checks the task store first, then the image store: when the task
 * store fails the image store was not checked, and keeps its last value.
 */
function recordStores(storeUp: Metrics["storeUp"] | undefined, code: string | undefined): void {
  if (code === undefined) {
    storeUp?.set({ store: "tasks" }, 1);
    storeUp?.set({ store: "images" }, 1);
  } else if (code === "store_unavailable") {
    storeUp?.set({ store: "tasks" }, 0);
  } else if (code === "storage_unavailable") {
    storeUp?.set({ store: "tasks" }, 1);
    storeUp?.set({ store: "images" }, 0);
  }
}
