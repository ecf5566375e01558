import type { Config } from "../config/config-schema.js";
import { compileModelPatterns } from "../channels/model-pattern.js";

/** Which models each configured group may see and use (see `ModelAccess` for principals). */
export interface GroupAccess {
  allows(group: string, model: string): boolean;
}

export function createGroupAccess(groups: Config["groups"]): GroupAccess {
  const compiled = new Map(
    Object.entries(groups).map(([name, group]) => [name, compileModelPatterns(group.models)]),
  );
  return {
    allows: (group, model) => compiled.get(group)?.(model) ?? false,
  };
}
