import type { Config } from "../../config/config-schema.js";

/** One key's shares of the task queue and store. */
export interface KeyLimits {
  maxQueuedPerKey: number;
  maxRetainedPerKey: number;
}

/** The default waiting share's ceiling, and the retained default's. */
const MAX_DEFAULT_QUEUED_PER_KEY = 100;
const MAX_DEFAULT_RETAINED_PER_KEY = 1000;
/** Finished tasks a key may hold by default, per place of its waiting share. */
const RETAINED_PER_QUEUED = 10;

/**
 * The limits of a key of `group`: the group's own (`groups.<name>.imageTasks`)
 * where set, else the `imageTasks` ones, else defaults derived from
 * `maxQueued`, so that with defaults one key never fills the queue, however
 * small the operator made it: half of `maxQueued` (at most 100, at least 1)
 * waiting, and ten times that held (at most 1000). Own keys only, so a group
 * named `__proto__` finds nothing on the prototype.
 */
export function keyLimits(config: Config, group: string): KeyLimits {
  const own = Object.hasOwn(config.groups, group) ? config.groups[group]?.imageTasks : undefined;
  const { imageTasks } = config;
  const maxQueuedPerKey =
    own?.maxQueuedPerKey ??
    imageTasks.maxQueuedPerKey ??
    Math.max(1, Math.min(MAX_DEFAULT_QUEUED_PER_KEY, Math.floor(imageTasks.maxQueued / 2)));
  const maxRetainedPerKey =
    own?.maxRetainedPerKey ??
    imageTasks.maxRetainedPerKey ??
    Math.max(
      maxQueuedPerKey,
      Math.min(MAX_DEFAULT_RETAINED_PER_KEY, RETAINED_PER_QUEUED * maxQueuedPerKey),
    );
  return { maxQueuedPerKey, maxRetainedPerKey };
}
