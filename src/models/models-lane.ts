import { ServiceError } from "../errors/service-error.js";
import { callerOf, type Lane } from "../http/lane.js";
import { createRouteTable, decodeSegment } from "../http/route-table.js";
import { sendJson } from "../http/send-json.js";
import type { ModelAccess } from "./model-access.js";
import { modelNotFound } from "./model-not-found.js";

const ROUTES = [
  { method: "GET", template: "/v1/models" },
  { method: "GET", template: "/v1/models/*id" },
] as const;

/**
 * `GET /v1/models` and `GET /v1/models/{id}` (an id may hold `/`): what the
 * key may see (its group's share of the channels' models, or a forward key's
 * gateway list), behind bearer auth.
 */
export function createModelsLane(deps: { access: ModelAccess }): Lane {
  const table = createRouteTable(ROUTES);
  return {
    match(method, path) {
      const hit = table(method, path);
      if (!hit) return undefined;
      const [rawId] = hit.params;
      return {
        template: hit.route.template,
        auth: true,
        async serve(call) {
          const models = await deps.access.list(callerOf(call));
          if (rawId === undefined) {
            sendJson(call.res, 200, { object: "list", data: models });
            return;
          }
          const id = decodeId(rawId);
          const model = models.find((candidate) => candidate.id === id);
          if (!model) throw modelNotFound(id);
          sendJson(call.res, 200, model);
        },
      };
    },
  };
}

/** A model id from its path segments, each percent-decoded. */
function decodeId(raw: string): string {
  const parts = raw.split("/").map(decodeSegment);
  if (parts.some((part) => part === undefined)) {
    throw new ServiceError("invalid_value", "The request could not be read.");
  }
  return parts.join("/");
}
