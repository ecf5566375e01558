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
    format: z
      .enum(["json", "pretty"], { error: "must be json or pretty" })
      .optional()
      .meta({
        description:
          "How `serve` writes its start-up banner and its shutdown: `json`, as log lines like every " +
          "other (`msg: started`, `msg: stopping`, `msg: stopped`); `pretty`, as text for a person. " +
          "Default: `pretty` when stdout is a terminal, else `json`. Log lines are JSON lines " +
          "either way. `LOG_FORMAT` overrides it.",
      }),
  })
  .strict()
  .prefault({})
  .meta({ description: "Logs: JSON lines on stdout." });
