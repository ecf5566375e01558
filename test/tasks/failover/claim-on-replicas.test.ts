import { slow } from "../../support/time-factor.js";
import { describe, expect, it } from "vitest";
import { uniquePrefix } from "../../support/redis.js";
import { pollUntil } from "../../support/redis-topology.js";
import { call, getTask, submitOk, upstreamPrompts, waitForStatus } from "../task-api.js";
import { counterOf } from "../replicas/replica-cluster.js";
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
// master that took the claim dies before passing it on: the run hands the task back instead of
// calling the channel, the task still completes, and the channel is called once (a run that had
// gone on would generate beside the run the promoted master starts). A cancel the same master
// answered is written again on the promoted one: the cancelled task does not run again.

const fixture = useReplicaSet();

describe("store.minReplicas and a run's claim", () => {
  it(
    "a claim and a cancel the dead master never passed on: one generation, the cancel holds",
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
      const held = "held, then cancelled";
      const first = await submitOk(app!, { prompt: held });
      // The channel holds the first call before it answers again: a run claimed but slow to
      // call (a loaded CI) got an image, and its completion, waited for on the frozen
      // replicas, kept the one slot for a minute (the cancel found the task completed).
      await pollUntil(
        "the channel to hold the first task's call",
        async () => (upstreamPrompts(upstream).includes(held) ? true : undefined),
        { timeoutMs: slow(10_000), intervalMs: 20 },
      );
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
      // The cancel answered while the replicas were frozen was written again on the promoted
      // master: the first task stays cancelled and is not generated again.
      const cancelled = await getTask(app!, first);
      expect(cancelled.body.status, cancelled.text).toBe("failed");
      expect(cancelled.body.error?.code).toBe("cancelled");
      expect(upstreamPrompts(upstream).filter((p) => p === held)).toHaveLength(1);
      // Neither task ran again: the claim the failover lost was not written again, the run
      // handed the task back and the queue ran it afresh. (Written again, the claim made its
      // run lose its lease to the job the promoted master still held waiting, and a rerun went
      // on after it: a second generation when the lease was lost mid-call.)
      expect(await counterOf(app!, "task_reruns_total", { reason: "lost" })).toBe(0);
    },
    slow(120_000),
  );
});
