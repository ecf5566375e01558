import { leaseSec, slow } from "../../support/time-factor.js";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { retrieveUntil, sdk } from "../../responses/response-helpers.js";
import { scriptChannel } from "../../responses/scripted-channel.js";
import { pino } from "pino";
import { startS3Server, type TestS3Server } from "../../support/s3-server.js";
import { getTask, submitOk, useApp, waitForStatus } from "../task-api.js";
import { dropLock, expectOneGeneration } from "./lease-lapsed.js";

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
