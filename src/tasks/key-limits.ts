import type { Config } from "../config/config-schema.js";

/** One key's shares of the task queue and store. */
export interface KeyLimits {
  maxQueuedPerKey: number;
  maxRetainedPerKey: number;
}

/**
 * The limits of a key of `group`: the group's own (`groups.<name>.imageTasks`)
 * where set, else the `imageTasks` defaults. Own keys only, so a group named
 * `__proto__` finds nothing on the prototype.
 */
export function keyLimits(config: Config, group: string): KeyLimits {
  const own = Object.hasOwn(config.groups, group) ? config.groups[group]?.imageTasks : undefined;
  return {
    maxQueuedPerKey: own?.maxQueuedPerKey ?? config.imageTasks.maxQueuedPerKey,
    maxRetainedPerKey: own?.maxRetainedPerKey ?? config.imageTasks.maxRetainedPerKey,
  };
}
