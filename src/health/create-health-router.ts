import { Router } from "express";
import { ServiceError } from "../errors/service-error.js";

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
      if (err instanceof ServiceError) throw err;
      throw new ServiceError("store_unavailable", "The task store cannot be reached.");
    }
    res.json({ status: "ready" });
  });
  return router;
}
