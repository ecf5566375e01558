import { leaseSec, slow } from "../../support/time-factor.js";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { retrieveUntil, sdk } from "../../responses/response-helpers.js";
import { scriptChannel } from "../../responses/scripted-channel.js";
import { createClient } from "@keyv/redis";
import { pino } from "pino";
import { REDIS_URL, deleteKeys, listKeys, uniquePrefix } from "../../support/redis.js";
import { startFakeUpstream } from "../../support/fake-upstream.js";
import { startS3Server, type TestS3Server } from "../../support/s3-server.js";
import type { TestApp, TestAppOptions } from "../../support/start-test-app.js";
import {
  getTask,
  submitOk,
  upstreamPrompts,
  useApp,
  waitForStatus,
  waitUntil,
} from "../task-api.js";

/*
 * A run's lease can lapse while its generation is under way or its images are written (the lock
 * not renewed in time: a store outage longer than the lease, a failover to a replica the lock
 * never reached, a stalled event loop). Here the lock is taken from Redis, as a lapsed lease
 * leaves it: the queue reports the lease lost at its next renewal and hands the job out again at
 * its next stalled check. The run goes on with the generation it pays for and completes the
 * task; the queue's second lease of the task waits for it and finds it finished. Before, the
 * lost lease cut the channel call or the image writes, and the second lease called the channel
 * again (a background response, never sent twice, failed `interrupted`).
 */

let s3: TestS3Server;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.close();
});

/** Takes the running task's queue lock from Redis, as a lease that lapsed leaves it. */
async function dropLock(app: TestApp): Promise<void> {
  const locks = (await listKeys(app.config.store.prefix)).filter((key) => key.endsWith(":lock"));
  expect(locks).toHaveLength(1);
  const client = createClient({ url: REDIS_URL });
  await client.connect();
  try {
    expect(await client.del(locks[0]!)).toBe(1);
  } finally {
    await client.close();
  }
}

/** The keys of the alive mark of a task's first run, under a replicas' prefix. */
async function marksOf(prefix: string, id: string): Promise<string[]> {
  return (await listKeys(prefix)).filter((key) => key.endsWith(`unleased-runs:${id}:1`));
}

/**
 * Replicas on a prefix of the test's own, in front of one fake channel: one task at a time each
 * (the replica still running a task cannot take its job again), a rerun's first grace 1 s + 3 s.
 */
async function useReplicas(label: string, lease: number) {
  const prefix = uniquePrefix(label);
  onTestFinished(async () => {
    await deleteKeys(prefix);
  });
  const upstream = await startFakeUpstream();
  onTestFinished(() => upstream.close());
  const replica = {
    upstream,
    redis: { prefix },
    imageTasks: { leaseSec: lease, maxConcurrent: 1 },
    config: { store: { url: REDIS_URL, prefix, commandTimeoutSec: 1 } },
  };
  return {
    prefix,
    upstream,
    start: (more: TestAppOptions = {}) => useApp({ ...replica, ...more }),
  };
}

/** The channel was called once for `prompt`, and no rerun was counted. */
async function expectOneGeneration(app: TestApp, prompt: string): Promise<void> {
  // Past a second run's call, had the next lease run the task again.
  await new Promise((resolve) => setTimeout(resolve, slow(3_000)));
  expect(upstreamPrompts(app.upstream).filter((p) => p === prompt)).toHaveLength(1);
  const text = await (await fetch(`${app.url}/metrics`)).text();
  expect(text).toMatch(/^image_task_sidecar_task_reruns_total\{reason="lost"\} 0$/m);
}

describe("a lease lost while the run pays for a generation (Redis)", () => {
  it(
    "mid-call: the call goes on and completes the task, the channel called once",
    async () => {
      const lease = leaseSec(2);
      const lines: Array<Record<string, unknown>> = [];
      const logger = pino({ level: "info" }, { write: (line) => lines.push(JSON.parse(line)) });
      const app = await useApp({ redis: true, imageTasks: { leaseSec: lease }, logger });
      // Longer than the renewal that finds the lock gone and the stalled check after it.
      app.upstream.behave("images", { kind: "ok", delayMs: lease * 2_500 });
      const asked = app.upstream.nextRequest("images");
      const prompt = "made once though its lease lapsed";
      const id = await submitOk(app, { prompt, response_format: "url" });
      await asked;
      await dropLock(app);
      const done = await waitForStatus(app, id, ["completed", "failed"], slow(30_000));
      expect(done.body.status, done.text).toBe("completed");
      expect(app.upstream.aborted).toBe(0);
      await expectOneGeneration(app, prompt);
      // Counted, and told in the log once as what it was, not as a queue outage.
      const text = await (await fetch(`${app.url}/metrics`)).text();
      expect(text).toMatch(/^image_task_sidecar_task_lease_lapses_total 1$/m);
      const job = expect.stringContaining(id);
      expect(lines.filter((line) => line.msg === "queue lease lapsed")).toMatchObject([
        { level: 40, component: "worker", err: job },
      ]);
      expect(lines.filter((line) => line.msg === "queue job lock lapsed")).toMatchObject([
        { level: 30, component: "worker", err: job },
      ]);
      expect(lines.filter((line) => line.msg === "queue error")).toEqual([]);
    },
    slow(60_000),
  );

  it(
    "mid-call, the job handed to another replica: that replica waits for the run, one generation",
    async () => {
      const lease = leaseSec(2);
      const { prefix, upstream, start } = await useReplicas("unleased", lease);
      const a = await start();
      // Past the renewal that finds the lock gone, the stalled check, the other replica's grace
      // and its first look at the run's alive mark.
      upstream.behave("images", { kind: "ok", delayMs: lease * 1_000 + slow(8_000) });
      const asked = upstream.nextRequest("images");
      const prompt = "made once while another replica waits";
      const id = await submitOk(a, { prompt, response_format: "url" });
      await asked;
      const lines: Array<Record<string, unknown>> = [];
      const logger = pino({ level: "info" }, { write: (line) => lines.push(JSON.parse(line)) });
      const b = await start({ logger });
      await dropLock(a);
      // The run says it goes on: its mark (its task and attempt) in the store.
      const marks = () => marksOf(prefix, id);
      await waitUntil(async () => (await marks()).length === 1, "the run's mark");
      const done = await waitForStatus(b, id, ["completed", "failed"], slow(40_000));
      expect(done.body.status, done.text).toBe("completed");
      expect(upstream.aborted).toBe(0);
      await expectOneGeneration(a, prompt);
      await expectOneGeneration(b, prompt);
      // The other replica took the job and waited for the run, told once in its log.
      const waits = lines.filter((line) => line.msg === "task.rerun_waits");
      expect(waits).toMatchObject([{ task_id: id, attempt: 1, reason: "unleased_run" }]);
      expect(lines.filter((line) => line.msg === "task.rerun")).toHaveLength(0);
      // Gone with the run.
      expect(await marks()).toEqual([]);
    },
    slow(60_000),
  );

  it(
    "a stop while the lease is lapsed hands the task back at the grace's end: another replica runs it",
    async () => {
      const { prefix, upstream, start } = await useReplicas("unleased-stop", leaseSec(2));
      const a = await start();
      upstream.behave("images", { kind: "hang" });
      const asked = upstream.nextRequest("images");
      const id = await submitOk(a, { prompt: "handed back by a stop", response_format: "url" });
      await asked;
      const b = await start();
      await dropLock(a);
      await waitUntil(async () => (await marksOf(prefix, id)).length === 1, "the run's mark");
      upstream.behave("images", { kind: "ok", delayMs: 100 });
      // The test app's stop gives 500 ms; BullMQ's own hand-back no longer reaches the run, and
      // the stop waited 5 s more for a worker that did not close, then left the run behind.
      const stopStartedMs = Date.now();
      await a.close();
      expect(Date.now() - stopStartedMs).toBeLessThan(slow(3_000));
      const done = await waitForStatus(b, id, ["completed", "failed"], slow(20_000));
      expect(done.body.status, done.text).toBe("completed");
      expect(upstream.aborted).toBe(1);
      expect(await marksOf(prefix, id)).toEqual([]);
    },
    slow(60_000),
  );

  it(
    "while its images wait for the image store (S3): completes with them, the channel called once",
    async () => {
      const lease = leaseSec(2);
      const app = await useApp({
        redis: true,
        imageTasks: { leaseSec: lease },
        config: {
          images: {
            ...s3.imagesConfig(`lease-lost-${randomBytes(4).toString("hex")}`),
            writeRetrySec: 120,
          },
        },
      });
      app.upstream.behave("images", { kind: "ok", delayMs: 500 });
      const asked = app.upstream.nextRequest("images");
      const prompt = "kept after its lease lapsed";
      const id = await submitOk(app, { prompt, response_format: "url" });
      await asked;
      await s3.stop();
      try {
        // The channel has answered and the run is retrying its image writes.
        await new Promise((resolve) => setTimeout(resolve, slow(1_500)));
        expect((await getTask(app, id)).body.status).toBe("in_progress");
        await dropLock(app);
        // Past the next renewals (every sixth of the lease) and the queue's stalled check (every
        // lease), which hands the job out again.
        await new Promise((resolve) => setTimeout(resolve, lease * 2_000));
        expect((await getTask(app, id)).body.status).toBe("in_progress");
      } finally {
        await s3.start();
      }
      const done = await waitForStatus(app, id, ["completed", "failed"], slow(30_000));
      expect(done.body.status, done.text).toBe("completed");
      expect((await fetch(done.body.data![0]!.url!)).status).toBe(200);
      await expectOneGeneration(app, prompt);
    },
    slow(60_000),
  );

  it(
    "a background response mid-stream: the stream goes on and the response completes, sent once",
    async () => {
      const lease = leaseSec(2);
      const app = await useApp({ redis: true, imageTasks: { leaseSec: lease } });
      const channel = scriptChannel(app.upstream, { hold: true });
      onTestFinished(() => channel.release());
      const client = sdk(app);
      const started = channel.nextStarted();
      const { id } = await client.responses.create({
        model: "gpt-4o-mini",
        input: "answered once though its lease lapsed",
        background: true,
      });
      await started;
      await dropLock(app);
      // Past the renewal that finds the lock gone and the stalled check after it.
      await new Promise((resolve) => setTimeout(resolve, lease * 2_000));
      channel.release();
      const done = await retrieveUntil(client, id, ["completed", "failed", "cancelled"]);
      expect(done.status, JSON.stringify(done.error)).toBe("completed");
      expect(done.output_text).toBe("Hello from the scripted channel!");
      expect(channel.aborted).toBe(0);
      expect(channel.calls).toBe(1);
    },
    slow(60_000),
  );
});
