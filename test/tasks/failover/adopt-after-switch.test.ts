import { leaseSec, slow } from "../../support/time-factor.js";
import { rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { imagesDirOf, uniquePrefix } from "../../support/redis.js";
import { redisCommands, startSentinelSet, type SentinelSet } from "../../support/redis-topology.js";
import { TOPOLOGY_PASSWORD } from "../../support/redis-topologies.js";
import { startTestApp } from "../../support/start-test-app.js";
import { getTask, submitOk, waitForStatus, waitUntil } from "../task-api.js";
import { COMMAND_TIMEOUT_SEC } from "./failover-load.js";

// What a failover loses may be a queued task's job (the old master acknowledged it and never
// passed it on; here it is deleted by hand before the master dies). Once the service follows
// the promoted master it makes sure every unfinished task has its job: the task runs within
// seconds of the switch, not at the next minute's adoption pass.

let set: SentinelSet;
let upstream: FakeUpstream;

beforeAll(async () => {
  [set, upstream] = await Promise.all([
    startSentinelSet({ password: TOPOLOGY_PASSWORD }),
    startFakeUpstream(),
  ]);
}, slow(60_000));
afterAll(async () => {
  await Promise.all([set?.stop(), upstream?.close()]);
});

describe("after a switch of the Redis primary", () => {
  it(
    "a queued task whose job the failover lost runs within seconds",
    async () => {
      const prefix = uniquePrefix("adopt-switch");
      onTestFinished(() => rm(imagesDirOf(prefix), { recursive: true, force: true }));
      const app = await startTestApp({
        upstream,
        // One task at a time: the second waits in the queue while the first runs.
        imageTasks: { maxConcurrent: 1, leaseSec: leaseSec(2) },
        config: {
          store: { url: set.url, prefix, commandTimeoutSec: COMMAND_TIMEOUT_SEC },
          images: { url: `file://${imagesDirOf(prefix)}` },
        },
      });
      onTestFinished(() => app.close());
      upstream.behave("images", { kind: "ok", delayMs: 1_500 });
      const running = await submitOk(app, { prompt: "running" });
      await waitForStatus(app, running, ["in_progress"]);
      const waiting = await submitOk(app, { prompt: "waiting" });

      // Its job goes (out of the wait list, and its hash), as a failover would lose it.
      const queue = `${prefix}::bull:image-tasks`;
      await redisCommands(
        set.master,
        [
          ["LREM", `${queue}:wait`, "0", waiting],
          ["DEL", `${queue}:${waiting}`],
          // On the replica before the master dies: the promoted one must not have the job.
          ["WAIT", "1", "2000"],
        ],
        { password: TOPOLOGY_PASSWORD },
      );
      await set.killMaster();
      await set.waitForFailover(30_000);
      const switched = performance.now();

      await waitUntil(
        async () => (await getTask(app, waiting)).status === 200,
        "the task store to answer again",
        30_000,
      );
      const done = await waitForStatus(app, waiting, ["completed", "failed"], 40_000);
      expect(done.body.status, done.text).toBe("completed");
      // The pass after the switch, the running task's end and a loaded machine: far below a minute.
      expect(performance.now() - switched).toBeLessThan(20_000);
      const first = await waitForStatus(app, running, ["completed", "failed"], 30_000);
      expect(first.body.status, first.text).toBe("completed");
    },
    slow(120_000),
  );
});
