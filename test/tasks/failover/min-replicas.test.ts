import { slow } from "../../support/time-factor.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { uniquePrefix } from "../../support/redis.js";
import { redisCommand, startSentinelSet, type SentinelSet } from "../../support/redis-topology.js";
import { TOPOLOGY_PASSWORD } from "../../support/redis-topologies.js";
import {
  call,
  expectError,
  submit,
  submitOk,
  upstreamPrompts,
  waitForStatus,
  type TaskJson,
} from "../task-api.js";
import { COMMAND_TIMEOUT_SEC, startReplicaApps } from "./failover-load.js";

// store.minReplicas on a real Sentinel set (master, one replica): a submission is answered
// 202 once the replica holds the task; with the replica frozen (SIGSTOP) it answers 503 and
// the task never runs.

let set: SentinelSet;
let upstream: FakeUpstream;
let replicaPid: number | undefined;

beforeAll(async () => {
  [set, upstream] = await Promise.all([
    startSentinelSet({ password: TOPOLOGY_PASSWORD }),
    startFakeUpstream(),
  ]);
}, slow(60_000));
afterAll(async () => {
  if (replicaPid) process.kill(replicaPid, "SIGCONT");
  await Promise.all([set?.stop(), upstream?.close()]);
});

/** The pid of the set's replica, as Redis reports it. */
async function pidOfReplica(): Promise<number> {
  const info = String(
    await redisCommand(set.replicas[0]!, ["INFO", "server"], { password: TOPOLOGY_PASSWORD }),
  );
  return Number(/process_id:(\d+)/.exec(info)![1]);
}

describe("store.minReplicas", () => {
  it(
    "answers 202 once a replica holds the task; without one, 503 in time, and the task never runs",
    async () => {
      upstream.behave("images", { kind: "ok", delayMs: 50 });
      const [app] = await startReplicaApps({
        upstream,
        count: 1,
        store: { url: set.url, prefix: uniquePrefix("min-replicas"), minReplicas: 1 },
      });
      const held = await submitOk(app!, { prompt: "held by the replica" });
      expect((await waitForStatus(app!, held, ["completed", "failed"])).body.status).toBe(
        "completed",
      );

      replicaPid = await pidOfReplica();
      process.kill(replicaPid, "SIGSTOP");
      const headers = { "Idempotency-Key": "frozen-replica" };
      const started = performance.now();
      const refused = await submit(app!, { prompt: "not confirmed" }, { headers });
      expectError(refused, 503, "store_unavailable");
      expect(performance.now() - started).toBeLessThan(
        slow(COMMAND_TIMEOUT_SEC * 1000 * 2 + 1_500),
      );

      // The task was cancelled: the owner's list shows it so, and no channel ever saw it.
      const listed = await call(app!, "GET", "/v1/images/tasks");
      const tasks = (listed.body as unknown as { data: TaskJson[] }).data;
      const cancelled = tasks.find((task) => task.id !== held);
      expect(cancelled).toMatchObject({ status: "failed", error: { code: "cancelled" } });

      // The client retries with the same key once the replica is back: one new task, one image.
      process.kill(replicaPid, "SIGCONT");
      replicaPid = undefined;
      const retried = await submitOk(app!, { prompt: "not confirmed" }, { headers });
      expect(retried).not.toBe(cancelled!.id);
      expect((await waitForStatus(app!, retried, ["completed", "failed"])).body.status).toBe(
        "completed",
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(upstreamPrompts(upstream).filter((p) => p === "not confirmed")).toHaveLength(1);
      expect((await waitForStatus(app!, cancelled!.id, ["failed"])).body.error).toMatchObject({
        code: "cancelled",
      });
    },
    slow(60_000),
  );
});
