import { z } from "zod";
import { modelPatterns, positiveInt } from "./field-types.js";

/** Per-key shares of the task queue and store; each field falls back to `imageTasks`. */
export const groupImageTasksSchema = z
  .object({
    maxQueuedPerKey: positiveInt("tasks").optional().meta({
      description:
        "Tasks one key of the group may have waiting at once. Default: `imageTasks.maxQueuedPerKey`.",
    }),
    maxRetainedPerKey: positiveInt("tasks")
      .optional()
      .meta({
        description:
          "Tasks one key of the group may hold at once, finished ones included until they " +
          "expire. Default: `imageTasks.maxRetainedPerKey`.",
      }),
  })
  .strict();

/** A group: what its keys may see and use. */
export const groupSchema = z
  .object({
    models: modelPatterns.meta({
      description:
        "Model ids and `*` globs the group's keys may see and use, e.g. " +
        '`["gpt-4o-mini", "gpt-image-*"]`; `["*"]` allows every model a channel serves.',
    }),
    imageTasks: groupImageTasksSchema.optional().meta({
      description: "This group's per-key task limits; unset fields take the `imageTasks` ones.",
    }),
  })
  .strict();
