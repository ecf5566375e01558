import { z } from "zod";

export const loggingSchema = z
  .object({
    /** pino level. Default `info`; `LOG_LEVEL` overrides it. */
    level: z
      .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
        error: "must be one of fatal, error, warn, info, debug, trace, silent",
      })
      .default("info"),
  })
  .strict()
  .prefault({});
