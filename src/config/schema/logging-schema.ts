import { z } from "zod";

/** Log output (pino JSON lines on stdout). */
export const loggingSchema = z
  .object({
    level: z
      .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
        error: "must be one of fatal, error, warn, info, debug, trace, silent",
      })
      .default("info")
      .meta({ description: "The pino log level. `LOG_LEVEL` overrides it." }),
  })
  .strict()
  .prefault({})
  .meta({ description: "Logs: JSON lines on stdout." });
