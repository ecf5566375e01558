import { z } from "zod";
import { positiveInt } from "./field-types.js";

/** Where tasks and image bytes live. */
export const storeSchema = z
  .object({
    /**
     * `memory://` (one process, lost on restart), `sqlite://./path.db` (one
     * process, survives restarts; the default in the embedded config) or
     * `redis://host:6379/0` (`rediss://` for TLS): any number of replicas.
     * `STORE_URL` overrides it.
     */
    url: z
      .string({ error: "must be a store URL" })
      .regex(
        /^(memory|sqlite|redis|rediss):\/\//,
        "must start with memory://, sqlite://, redis:// or rediss://",
      )
      .default("memory://"),
    /**
     * Redis only: the start of every key the service writes (task records,
     * images, queue, events). Replicas of one deployment share it; two
     * deployments on one Redis need two prefixes. Default `image-task-sidecar`.
     */
    prefix: z
      .string({ error: "must be a string" })
      .regex(/^[A-Za-z0-9_.:{}-]{1,64}$/, "must be 1-64 letters, digits or _ . : - { }")
      .default("image-task-sidecar"),
    /**
     * Redis only: seconds any command may wait for its answer. A Redis that
     * accepts connections and answers nothing (paused, failing over) is then
     * cut and reconnected: task routes answer 503 `store_unavailable` and
     * `/readyz` 503 within about this, instead of hanging. Idle connections
     * are probed as often. Default 5.
     */
    commandTimeoutSec: positiveInt("seconds").default(5),
  })
  .strict()
  .prefault({});
