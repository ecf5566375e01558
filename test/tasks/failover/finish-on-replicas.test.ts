import { slow } from "../../support/time-factor.js";
import { describe, expect, it } from "vitest";
import { uniquePrefix } from "../../support/redis.js";
import { pollUntil } from "../../support/redis-topology.js";
import { call, getTask, submitOk, upstreamPrompts, waitForStatus, waitUntil } from "../task-api.js";
import { startReplicaApps } from "./failover-load.js";
import {
  freezeReplicas,
  killMasterAndFollow,
  useReplicaSet,
  statusOnMaster,
} from "./frozen-replicas.js";

// store.minReplicas keeps a run's end as it keeps a new task: on a real Sentinel set whose
// replicas are frozen (SIGSTOP) while a run completes its task, the master that took the
// completion dies before passing it on. The task still completes, with one generation.

const fixture = useReplicaSet();

describe("store.minReplicas and a run's end", () => {
  it(
    "while no replica confirms, eight runs waiting on their ends leave the store answering polls",
    async () => {
      const { set, upstream } = fixture;
      upstream.behave("images", { kind: "ok", delayMs: 300 });
      const [app] = await startReplicaApps({
        upstream,
        count: 1,
        imageTasks: { maxConcurrent: 8 },
        store: { url: set.url, prefix: uniquePrefix("finish-waits"), minReplicas: 1 },
      });
      const ids = await Promise.all(
        Array.from({ length: 8 }, (_, n) => submitOk(app!, { prompt: `waiting end ${n}` })),
      );
      await waitUntil(() => upstreamPrompts(upstream).length >= 8, "the eight channel calls");
      const thaw = await freezeReplicas(set);
      try {
        // Every run has its image and waits for replicas to hold its end.
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        for (const id of ids) {
          const started = performance.now();
          expect((await getTask(app!, id)).status).toBe(200);
          // One WAIT at a time holds the connection (250 ms at most), not one per run.
          expect(performance.now() - started).toBeLessThan(slow(1_000));
        }
      } finally {
        thaw();
      }
      for (const id of ids) {
        expect((await waitForStatus(app!, id, ["completed", "failed"], 20_000)).body.status).toBe(
          "completed",
        );
      }
    },
    slow(60_000),
  );

  it(
    "a completion the dead master never passed on is written again on the promoted one: completed, one generation",
    async () => {
      const { set, upstream } = fixture;
      upstream.behave("images", { kind: "ok", delayMs: 1_500 });
      const [app] = await startReplicaApps({
        upstream,
        count: 1,
        store: { url: set.url, prefix: uniquePrefix("finish-replicas"), minReplicas: 1 },
      });
      const prompt = "completed as the master dies";
      const id = await submitOk(app!, { prompt });
      await waitUntil(() => upstreamPrompts(upstream).includes(prompt), "the channel call", 10_000);

      // The replicas stop taking the master's writes while the channel answers.
      const thaw = await freezeReplicas(set, { fill: true });
      await pollUntil(
        "the master to hold the task completed",
        async () => ((await statusOnMaster(set, id)) === "completed" ? true : undefined),
        { timeoutMs: slow(10_000), intervalMs: 20 },
      );
      await killMasterAndFollow(set, thaw, app!, id);
      const done = await waitForStatus(app!, id, ["completed", "failed"], 30_000);
      expect(done.body.status, done.text).toBe("completed");
      // Past the time a second run would have taken (a lease, a stalled check, the channel's 1.5 s).
      await new Promise((resolve) => setTimeout(resolve, slow(6_000)));
      expect(upstreamPrompts(upstream).filter((p) => p === prompt)).toHaveLength(1);
      const again = await call(app!, "GET", `/v1/images/tasks/${id}`);
      expect(again.body).toMatchObject({ status: "completed" });
    },
    slow(120_000),
  );
});
