import { z } from "zod";
import { positiveInt } from "./field-types.js";

/** Where task records live (image bytes live in the image store, `images`). */
export const storeSchema = z
  .object({
    url: z
      .string({ error: "must be a store URL" })
      .regex(
        /^(memory|sqlite|redis|rediss):\/\//,
        "must start with memory://, sqlite://, redis:// or rediss://",
      )
      .default("memory://")
      .meta({
        description:
          "The task store: `memory://` (one process, lost on restart), `sqlite://./path.db` " +
          "(one process, survives restarts; the embedded defaults use `sqlite://./data/sidecar.db`) " +
          "or `redis://host:6379/0` (`rediss://` for TLS): any number of replicas. `STORE_URL` " +
          "overrides it.",
      }),
    prefix: z
      .string({ error: "must be a string" })
      .regex(/^[A-Za-z0-9_.:{}-]{1,64}$/, "must be 1-64 letters, digits or _ . : - { }")
      .default("image-task-sidecar")
      .meta({
        description:
          "Redis only: the start of every key the service writes (task records, queue, " +
          "events). Replicas of one deployment share it; two deployments on one Redis need two " +
          "prefixes.",
      }),
    connectTimeoutSec: positiveInt("seconds")
      .default(10)
      .meta({
        description:
          "Redis only: seconds start-up waits for Redis before it gives up with a line naming " +
          "the URL (password masked). Once connected, the service reconnects for as long as it " +
          "takes. Under Kubernetes a replica that gives up is restarted, and tries again.",
      }),
    commandTimeoutSec: positiveInt("seconds")
      .default(5)
      .meta({
        description:
          "Redis only: seconds any command may wait for its answer. A Redis that accepts " +
          "connections and answers nothing (paused, failing over) is then cut and reconnected: " +
          "task routes answer 503 `store_unavailable` and `/readyz` 503 within about this, " +
          "instead of hanging. Idle connections are probed as often.",
      }),
  })
  .strict()
  .prefault({})
  .meta({ description: "The task store: task records and their indexes." });
