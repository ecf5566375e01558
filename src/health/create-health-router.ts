import { Router } from "express";
import { readiness, type ReadinessDeps } from "./readiness.js";

/** Seconds a probe that found the service unready is told to wait. */
const RETRY_AFTER_SEC = 5;

/**
 * `GET /healthz` (the process answers) and `GET /readyz` (the task store and
 * the image store work, and the service is not shutting down: see
 * {@link readiness}), without auth, for probes.
 */
export function createHealthRouter(deps: ReadinessDeps): Router {
  const router = Router();
  router.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const { status, body } = await readiness(deps);
    if (status !== 200) res.setHeader("retry-after", String(RETRY_AFTER_SEC));
    res.status(status).json(body);
  });
  return router;
}
