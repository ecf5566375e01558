import { Router } from "express";
import { getPrincipal } from "../auth/principal.js";
import type { ChannelRegistry } from "../channels/channel-registry.js";
import type { GroupAccess } from "./group-access.js";
import { modelNotFound } from "./model-not-found.js";

/** `GET /v1/models` and `GET /v1/models/{id}`: the channels' models the key's group allows. */
export function createModelsRouter(deps: {
  registry: ChannelRegistry;
  access: GroupAccess;
}): Router {
  const router = Router();

  async function visibleModels(group: string) {
    const all = await deps.registry.listModels();
    return all.filter((model) => deps.access.allows(group, model.id));
  }

  router.get("/v1/models", async (_req, res) => {
    const { group } = getPrincipal(res);
    res.json({ object: "list", data: await visibleModels(group) });
  });

  router.get("/v1/models/*id", async (req, res) => {
    const { group } = getPrincipal(res);
    const id = ([] as string[]).concat((req.params as { id: string | string[] }).id).join("/");
    const model = (await visibleModels(group)).find((candidate) => candidate.id === id);
    if (!model) throw modelNotFound(id);
    res.json(model);
  });

  return router;
}
