import { z } from "zod";
import { portNumber } from "./field-types.js";

/** Who may read `GET /metrics`, and where. */
export const metricsSchema = z
  .object({
    port: portNumber.optional().meta({
      description:
        "Serve `/metrics` on a listener of its own at this port, and then not on the main port " +
        "(so the API port can be public and the metrics port not); 0 picks a free port. " +
        "Default: unset, `/metrics` is served on the main port.",
    }),
    host: z.string().min(1).optional().meta({
      description: "Interface of that listener, e.g. `127.0.0.1`. Default: `server.host`.",
    }),
    bearerToken: z
      .string({ error: "must be a string" })
      .optional()
      .meta({
        description:
          "When set, `/metrics` (wherever it is served) answers only requests with " +
          "`Authorization: Bearer <bearerToken>` (Prometheus: `authorization: {credentials: ...}`). " +
          "Set but empty (an unset `${VAR}`): every scrape is refused. Default: unset, no auth.",
      }),
  })
  .strict()
  .prefault({})
  .meta({ description: "Who may read `GET /metrics`, and where." });
