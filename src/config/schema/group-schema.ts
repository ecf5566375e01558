import { z } from "zod";
import { modelPatterns, positiveInt } from "./field-types.js";

/** Per-key shares of the task queue and store; each field falls back to `imageTasks`. */
export const groupImageTasksSchema = z
  .object({
    /** Tasks one key of the group may have waiting at once. Default `imageTasks.maxQueuedPerKey`. */
    maxQueuedPerKey: positiveInt("tasks").optional(),
    /**
     * Tasks one key of the group may hold at once, finished ones included until
     * they expire. Default `imageTasks.maxRetainedPerKey`.
     */
    maxRetainedPerKey: positiveInt("tasks").optional(),
  })
  .strict();

export const groupSchema = z
  .object({
    /** Model ids and `*` globs the group may see and use. */
    models: modelPatterns,
    /** This group's per-key task limits; unset fields take the `imageTasks` defaults. */
    imageTasks: groupImageTasksSchema.optional(),
  })
  .strict();
