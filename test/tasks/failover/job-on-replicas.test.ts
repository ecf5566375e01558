import { slow } from "../../support/time-factor.js";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import { uniquePrefix } from "../../support/redis.js";
import { pollUntil } from "../../support/redis-topology.js";
import { startFakeAsyncChannel, type FakeAsyncChannel } from "../async/fake-async-channel.js";
import { submitOk, waitForStatus, waitUntil } from "../task-api.js";
import { startReplicaApps } from "./failover-load.js";
import {
  freezeReplicas,
  killMasterAndFollow,
  recordOnMaster,
  useReplicaSet,
} from "./frozen-replicas.js";

// store.minReplicas keeps the id of a channel's job (an async channel: sub2api, Bifrost, OpenAI
// background) as it keeps a run's claim and end: replicas confirm it, or it is written again on
// the promoted master. Without it, a failover that lost the id left a task in progress with
// nothing to poll: its next run submitted the generation again (a second paid image) and the
// first job was cancelled.

const fixture = useReplicaSet();
let channel: FakeAsyncChannel;
beforeAll(async () => {
  channel = await startFakeAsyncChannel();
});
afterAll(() => channel?.close());

describe("store.minReplicas and a channel's job", () => {
  it(
    "a job id the dead master never passed on: the job is polled to its end, never submitted again",
    async () => {
      const { set, upstream } = fixture;
      channel.behave({ finishAfterMs: "never" });
      const [app] = await startReplicaApps({
        upstream,
        count: 1,
        store: { url: set.url, prefix: uniquePrefix("job-replicas"), minReplicas: 1 },
        config: {
          channels: [
            {
              name: "jobs",
              baseUrl: channel.baseUrl,
              apiKey: UPSTREAM_KEY,
              models: ["gpt-image-1"],
              async: "sub2api",
              pollSec: 1,
            },
          ],
        },
      });
      const release = channel.holdSubmissions();
      onTestFinished(release);
      const id = await submitOk(app!, { prompt: "submitted as the master dies" });
      await waitUntil(() => channel.submissions.sub2api === 1, "the run's submission", 30_000);

      // The channel answers with its job while the replicas cannot take the master's writes.
      const thaw = await freezeReplicas(set, { fill: true });
      release();
      const jobId = await pollUntil(
        "the master to hold the job's id",
        async () => /"upstream":\{[^}]*"id":"([^"]+)"/.exec(await recordOnMaster(set, id))?.[1],
        { timeoutMs: slow(10_000), intervalMs: 20 },
      );
      expect(jobId).toBe(channel.jobs[0]!.id);
      await killMasterAndFollow(set, thaw, app!, id);
      // Polled again after the switch (by the run, or a run that took the task over), or
      // submitted again (what the test must not see).
      const polled = channel.jobs[0]!.polls.length;
      await waitUntil(
        () => channel.jobs[0]!.polls.length > polled || channel.submissions.sub2api > 1,
        "a poll after the switch",
        60_000,
      );
      expect(channel.submissions.sub2api).toBe(1);
      channel.finish(jobId);
      const done = await waitForStatus(app!, id, ["completed", "failed"], 60_000);
      expect(done.body.status, done.text).toBe("completed");
      expect(channel.submissions.sub2api).toBe(1);
      expect(channel.jobs).toHaveLength(1);
      expect(channel.cancels).toEqual([]);
    },
    slow(180_000),
  );
});
