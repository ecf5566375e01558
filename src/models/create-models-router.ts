import { Router } from "express";
import { getPrincipal } from "../auth/principal.js";
import type { ChannelRegistry } from "../channels/channel-registry.js";
import { AppError } from "../http/app-error.js";
import type { GroupAccess } from "./group-access.js";

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

/** One message for "unknown" and "not yours", so a key cannot probe other groups' models. */
export function modelNotFound(model: string): AppError {
  return new AppError(
    "model_not_found",
    `The model '${model}' does not exist or you do not have access to it.`,
    { param: "model" },
  );
}
