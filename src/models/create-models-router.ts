import { Router } from "express";
import { getPrincipal } from "../auth/principal.js";
import type { ModelAccess } from "./model-access.js";
import { modelNotFound } from "./model-not-found.js";

/**
 * `GET /v1/models` and `GET /v1/models/{id}`: what the key may see (its
 * group's share of the channels' models, or a forward key's gateway list).
 */
export function createModelsRouter(deps: { access: ModelAccess }): Router {
  const router = Router();

  router.get("/v1/models", async (_req, res) => {
    res.json({ object: "list", data: await deps.access.list(getPrincipal(res)) });
  });

  router.get("/v1/models/*id", async (req, res) => {
    const id = ([] as string[]).concat((req.params as { id: string | string[] }).id).join("/");
    const models = await deps.access.list(getPrincipal(res));
    const model = models.find((candidate) => candidate.id === id);
    if (!model) throw modelNotFound(id);
    res.json(model);
  });

  return router;
}
