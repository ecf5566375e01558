import { slow } from "../../support/time-factor.js";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import {
  startFakeAsyncChannel,
  type Dialect,
  type FakeAsyncChannel,
} from "../async/fake-async-channel.js";
import { cancelTask, getTask, submitOk, waitForStatus, waitUntil } from "../task-api.js";
import {
  clusterConfig,
  counterOf,
  logLines,
  startReplicas,
  target,
  useReplicaEnvironment,
} from "./replica-cluster.js";

/*
 * Two replicas on one Redis in front of a channel with an async API: a
 * generation is submitted once, whatever happens to the replica that
 * submitted it. A replica that stops hands its polls over at once and exits;
 * one that dies has its polls taken over once its lease expires.
 */

useReplicaEnvironment();

let channel: FakeAsyncChannel;
beforeAll(async () => {
  channel = await startFakeAsyncChannel();
});
afterAll(() => channel.close());
beforeEach(() => channel.reset());

const INFO = { LOG_LEVEL: "info" };

function config(dialect: Dialect, options: { leaseSec: number; timeoutSec?: number }) {
  return clusterConfig({
    leaseSec: options.leaseSec,
    shutdownGraceSec: null,
    imageTasks: { timeoutSec: options.timeoutSec ?? 120 },
    channels: [
      {
        name: "jobs",
        baseUrl: channel.baseUrl,
        apiKey: UPSTREAM_KEY,
        models: ["gpt-image-1"],
        async: dialect,
        pollSec: 1,
        ...(dialect === "openai-background" ? { responsesModel: "gpt-4.1-mini" } : {}),
      },
    ],
  });
}

/** Waits until the channel has been polled for its first job: its id is in the task's record. */
async function firstPoll(): Promise<string> {
  await waitUntil(() => (channel.jobs[0]?.polls.length ?? 0) >= 1, "a first poll", 30_000);
  return channel.jobs[0]!.id;
}

describe("a rollout with a channel that runs generations as jobs", () => {
  it(
    "SIGKILL right after the submission: the other replica polls the job, never submits again",
    async () => {
      channel.behave({ finishAfterMs: "never" });
      const configFile = await config("sub2api", { leaseSec: 3 });
      const [doomed] = await startReplicas(configFile, 1);
      const id = await submitOk(target(doomed!), { prompt: "killed after submit" });
      const jobId = await firstPoll();
      const [survivor] = await startReplicas(configFile, 1, INFO);
      doomed!.child.kill("SIGKILL");
      await doomed!.exited;
      const polled = channel.jobs[0]!.polls.length;
      await waitUntil(() => channel.jobs[0]!.polls.length > polled, "the survivor's poll", 60_000);
      channel.finish(jobId);

      const done = await waitForStatus(target(survivor!), id, ["completed", "failed"], 30_000);
      expect(done.body.status, done.text).toBe("completed");
      expect(channel.submissions.sub2api).toBe(1);
      expect(channel.jobs).toHaveLength(1);
      expect(await counterOf(survivor!, "task_handovers_total", { reason: "lost" })).toBe(1);
      expect(await counterOf(survivor!, "task_reruns_total", { reason: "lost" })).toBe(0);
      await waitUntil(
        () => logLines(survivor!, "task.started").length > 0,
        "the task.started line",
      );
      expect(logLines(survivor!, "task.started")[0]).toMatchObject({
        task_id: id,
        resumed: "lost",
      });
    },
    slow(120_000),
  );

  it(
    "SIGTERM right after the submission: the poll is handed over at once, the replica exits, the other finishes it",
    async () => {
      channel.behave({ finishAfterMs: "never" });
      // A long lease: only a hand-over, not a lock expiry, can move the poll in time.
      const configFile = await config("openai-background", { leaseSec: 60 });
      const [leaving] = await startReplicas(configFile, 1, INFO);
      const id = await submitOk(target(leaving!), { prompt: "stopped after submit" });
      const jobId = await firstPoll();
      const [staying] = await startReplicas(configFile, 1, INFO);
      const before = await getTask(target(staying!), id);
      expect(before.body.status).toBe("in_progress");

      const signalled = Date.now();
      leaving!.child.kill("SIGTERM");
      setTimeout(() => leaving!.child.kill("SIGTERM"), 100);
      expect(await leaving!.exited).toBe(0);
      // The job runs on; a replica that only polls exits without waiting for it.
      expect(Date.now() - signalled).toBeLessThan(15_000);
      expect(logLines(leaving!, "task.handover")).toMatchObject([
        { task_id: id, channel: "jobs", dialect: "openai-background" },
      ]);
      const polled = channel.jobs[0]!.polls.length;
      await waitUntil(
        () => channel.jobs[0]!.polls.length > polled,
        "the other replica's poll",
        30_000,
      );
      channel.finish(jobId);

      const done = await waitForStatus(target(staying!), id, ["completed", "failed"], 30_000);
      expect(done.body.status, done.text).toBe("completed");
      // Its start stays the first run's: the timeout counts from it.
      expect(done.body.started_at).toBe(before.body.started_at);
      expect(channel.submissions["openai-background"]).toBe(1);
      expect(channel.cancels).toHaveLength(0);
      await waitUntil(() => logLines(staying!, "task.started").length > 0, "the task.started line");
      expect(logLines(staying!, "task.started")[0]).toMatchObject({
        task_id: id,
        resumed: "handover",
      });
    },
    slow(120_000),
  );

  it(
    "a job that never finishes fails `timeout` from the task's first start, across a hand-over; polls stop",
    async () => {
      channel.behave({ finishAfterMs: "never" });
      const configFile = await config("bifrost", { leaseSec: 60, timeoutSec: 10 });
      const [leaving] = await startReplicas(configFile, 1);
      const id = await submitOk(target(leaving!), { prompt: "never ends" });
      await firstPoll();
      const [staying] = await startReplicas(configFile, 1);
      const started = (await getTask(target(staying!), id)).body.started_at!;
      leaving!.child.kill("SIGTERM");
      expect(await leaving!.exited).toBe(0);

      const done = await waitForStatus(target(staying!), id, ["completed", "failed"], 60_000);
      expect(done.body.error?.code).toBe("timeout");
      expect(done.body.started_at).toBe(started);
      expect(done.body.completed_at! - started).toBeLessThanOrEqual(13);
      const polls = channel.jobs[0]!.polls.length;
      await new Promise((resolve) => setTimeout(resolve, 2500));
      expect(channel.jobs[0]!.polls.length).toBe(polls);
      expect(channel.submissions.bifrost).toBe(1);
    },
    slow(120_000),
  );

  it(
    "a cancel on another replica reaches the poller, which sends it on to the channel",
    async () => {
      channel.behave({ finishAfterMs: "never" });
      const configFile = await config("openai-background", { leaseSec: 10 });
      const [poller, other] = await startReplicas(configFile, 2);
      const id = await submitOk(target(poller!), { prompt: "cancel across" });
      const jobId = await firstPoll();
      expect((await cancelTask(target(other!), id)).status).toBe(200);
      await waitUntil(() => channel.cancels.length === 1, "the cancel sent on", 30_000);
      expect(channel.cancels).toEqual([jobId]);
      expect((await getTask(target(other!), id)).body.error?.code).toBe("cancelled");
    },
    slow(120_000),
  );
});
