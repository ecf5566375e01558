import { z } from "zod";
import { parseRedisTopology } from "./redis-topology.js";
import { positiveInt } from "./field-types.js";

/** Where task records live (image bytes live in the image store, `images`). */
export const storeSchema = z
  .object({
    url: z
      .string({ error: "must be a store URL" })
      .regex(
        /^(memory|sqlite|rediss?|rediss?\+sentinel|rediss?\+cluster):\/\//,
        "must start with memory://, sqlite://, redis://, redis+sentinel:// or redis+cluster:// " +
          "(rediss for TLS)",
      )
      .superRefine((url, ctx) => {
        // A URL that failed the scheme check above has its one line already.
        if (!/^rediss?(\+sentinel|\+cluster)?:\/\//.test(url)) return;
        const topology = parseRedisTopology(url);
        if (typeof topology === "string") ctx.addIssue({ code: "custom", message: topology });
      })
      .default("memory://")
      .meta({
        description:
          "The task store: `memory://` (one process, lost on restart), `sqlite://./path.db` " +
          "(one process, survives restarts; the embedded defaults use `sqlite://./data/sidecar.db`) " +
          "or Redis for any number of replicas: `redis://host:6379/0` (one server), " +
          "`redis+sentinel://[:password@]host:port[,host:port...]/<master name>[/<db>]` (Redis " +
          "Sentinel) or `redis+cluster://[:password@]host:port[,host:port...]` (Redis Cluster); " +
          "`rediss` in place of `redis` for TLS. `STORE_URL` overrides it.",
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
          "task routes answer 503 `store_unavailable` within about this, instead of hanging, " +
          "and `/readyz` reports the store's state (200, `degraded`: the replica still serves " +
          "the passthrough). Idle connections are probed as often.",
      }),
    sentinelPassword: z
      .string({ error: "must be a string" })
      .min(1, "must not be empty")
      .optional()
      .meta({
        description:
          "Redis Sentinel only: the sentinels' own password (`requirepass` in sentinel.conf), " +
          "when they have one; the Redis servers' password is the one in `store.url`. Unset by " +
          "default.",
      }),
    minReplicas: z
      .number({ error: "must be a whole number" })
      .int("must be a whole number")
      .min(0, "must be 0 or more")
      .max(16, "must be 16 or less")
      .default(0)
      .meta({
        description:
          "Redis only: how many Redis replicas must hold a new task before its submission is " +
          "answered 202 (`WAIT`). When they do not confirm within `commandTimeoutSec`, the " +
          "submission answers 503 `store_unavailable` and the task is cancelled, never run. " +
          "A run's claim (before it calls a channel), the id of an async channel's job and " +
          "its end (completed or failed) are kept the same way: waited for on as many " +
          "replicas, and written again on the " +
          "promoted primary when a failover lost them (for up to a minute; a lost claim is " +
          "not: its run gives the task back to the queue), so a task is " +
          "neither stuck nor generated twice; a cancel too, without holding its answer. " +
          "0 (the default) answers once the primary has it: a failover right after may lose a " +
          "task that was answered 202. Keeping submissions open through a failover needs one " +
          "Redis replica more than this.",
      }),
  })
  .strict()
  .prefault({})
  .meta({ description: "The task store: task records and their indexes." });
