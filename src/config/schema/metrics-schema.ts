import { z } from "zod";
import { portNumber } from "./field-types.js";

/** Who may read `GET /metrics`, and where. */
export const metricsSchema = z
  .object({
    /**
     * Serve `/metrics` on a listener of its own at this port, and then not on
     * the main port (so the API port can be public and the metrics port not).
     * Default: unset, `/metrics` is served on the main port. 0 picks a free port.
     */
    port: portNumber.optional(),
    /** Interface of that listener, e.g. `127.0.0.1`. Default: `server.host`. */
    host: z.string().min(1).optional(),
    /**
     * When set, `/metrics` (wherever it is served) answers only requests with
     * `Authorization: Bearer <bearerToken>` (Prometheus: `authorization:
     * {credentials: ...}`). Set but empty (an unset `${VAR}`): every scrape is
     * refused. Default: unset, no auth.
     */
    bearerToken: z.string({ error: "must be a string" }).optional(),
  })
  .strict()
  .prefault({});
