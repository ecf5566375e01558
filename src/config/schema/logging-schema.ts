import { z } from "zod";
import { fromText } from "./field-types.js";

/** Log output (pino JSON lines on stdout). */
export const loggingSchema = z
  .object({
    level: z
      .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
        error: "must be one of fatal, error, warn, info, debug, trace, silent",
      })
      .default("info")
      .meta({ description: "The pino log level. `LOG_LEVEL` overrides it." }),
    access: fromText(z.boolean({ error: "must be true or false" }))
      .default(true)
      .meta({
        description:
          "One access line per HTTP request (`msg: request`, at `info`; `/healthz`, `/readyz` and " +
          "`/metrics` at `debug`), written when the answer ends or the client leaves. `false` " +
          "turns them off.",
      }),
  })
  .strict()
  .prefault({})
  .meta({ description: "Logs: JSON lines on stdout." });
