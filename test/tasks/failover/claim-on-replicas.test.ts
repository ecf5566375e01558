import { slow } from "../../support/time-factor.js";
import { describe, expect, it } from "vitest";
import { uniquePrefix } from "../../support/redis.js";
import { pollUntil } from "../../support/redis-topology.js";
import { call, submitOk, upstreamPrompts, waitForStatus } from "../task-api.js";
import { startReplicaApps } from "./failover-load.js";
import {
  freezeReplicas,
  killMasterAndFollow,
  useReplicaSet,
  queueOnMaster,
  statusOnMaster,
} from "./frozen-replicas.js";

// store.minReplicas keeps a run's claim as it keeps a new task: the claim waits for a replica
// before the run calls its channel. Here the replicas are frozen while a task is claimed and the
// master that took the claim dies before passing it on: the task still completes, and the
// channel is called once (a run that had gone on would generate beside the run the promoted
// master starts).

const fixture = useReplicaSet();

describe("store.minReplicas and a run's claim", () => {
  // Skipped: failed in 2 of 5 clean-clone CI runs (never in 25 runs here, under load). The
  // last failure's details: the master had not moved, and the first task's job was still
  // active 17 s after its cancel answered 200 (the second waiting): the cancelled run did not
  // end while the replicas were frozen. Why is open (see the closing note of 2026-12-03).
  it.skip(
    "a claim the dead master never passed on: the task still completes, with one generation",
    async () => {
      const { set, upstream } = fixture;
      upstream.behave("images", { kind: "hang" });
      const [app] = await startReplicaApps({
        upstream,
        count: 1,
        // One task at a time: the second waits until the first is cancelled.
        imageTasks: { maxConcurrent: 1 },
        store: { url: set.url, prefix: uniquePrefix("claim-replicas"), minReplicas: 1 },
      });
      const first = await submitOk(app!, { prompt: "held, then cancelled" });
      await waitForStatus(app!, first, ["in_progress"]);
      upstream.behave("images", { kind: "ok", delayMs: 300 });
      const prompt = "claimed as the master dies";
      const id = await submitOk(app!, { prompt });

      // The second task is claimed while the replicas cannot take the master's writes.
      const thaw = await freezeReplicas(set, { fill: true });
      expect((await call(app!, "POST", `/v1/images/tasks/${first}/cancel`)).status).toBe(200);
      let seen = "";
      await pollUntil(
        "the master to hold the second task claimed",
        async () => {
          const { set, upstream } = fixture;
          const status = await statusOnMaster(set, id);
          if (status === "in_progress") return true;
          seen = `second task ${status}; ${await queueOnMaster(set)}; upstream ${upstreamPrompts(upstream).join(" | ")}`;
          return undefined;
        },
        { timeoutMs: slow(10_000), intervalMs: 20, details: () => seen },
      );
      await killMasterAndFollow(set, thaw, app!, id);
      const done = await waitForStatus(app!, id, ["completed", "failed"], 30_000);
      expect(done.body.status, done.text).toBe("completed");
      await new Promise((resolve) => setTimeout(resolve, slow(3_000)));
      expect(upstreamPrompts(upstream).filter((p) => p === prompt)).toHaveLength(1);
    },
    slow(120_000),
  );
});
