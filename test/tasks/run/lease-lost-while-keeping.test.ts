import { leaseSec, slow } from "../../support/time-factor.js";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redisCommand } from "../../support/redis-topology.js";
import { REDIS_URL } from "../../support/redis.js";
import { startS3Server, type TestS3Server } from "../../support/s3-server.js";
import {
  getTask,
  submitOk,
  upstreamPrompts,
  useApp,
  waitForStatus,
  waitUntil,
} from "../task-api.js";

/*
 * A run whose channel call has returned holds a paid generation. Its lease can lapse while it
 * writes the images (the lock not renewed in time: a store outage longer than the lease, a
 * failover to a replica the lock never reached, a stalled event loop). Here the image store
 * (s3rver) is away while the images are written, and the lock is taken from Redis, as the lease
 * lapsing leaves it: the queue reports the lease lost at its next renewal. The run goes on
 * writing; once the store is back the task completes with that generation, and the queue's
 * second lease of the task finds it finished. Before, the lost lease ended the write, its
 * images were dropped and the queue's next lease called the channel again.
 */

let s3: TestS3Server;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.close();
});

const { hostname, port } = new URL(REDIS_URL);
const redis = { host: hostname, port: Number(port) };

describe("a lease lost while the run keeps its result (Redis, S3 images)", () => {
  it(
    "completes with the generation in hand: the channel is called once",
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
        const writes = s3.requests.length;
        await new Promise((resolve) => setTimeout(resolve, slow(1_500)));
        expect((await getTask(app, id)).body.status).toBe("in_progress");
        expect(s3.requests.length).toBe(writes);
        const lock = `${app.config.store.prefix}::bull:image-tasks:${id}:lock`;
        expect(await redisCommand(redis, ["DEL", lock])).toBe(1);
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
      // Past a second run's call (500 ms), had the next lease run the task again.
      await new Promise((resolve) => setTimeout(resolve, slow(3_000)));
      expect(upstreamPrompts(app.upstream).filter((p) => p === prompt)).toHaveLength(1);
      await waitUntil(async () => {
        const text = await (await fetch(`${app.url}/metrics`)).text();
        return /^image_task_sidecar_task_reruns_total\{reason="lost"\} 0$/m.test(text);
      }, "no rerun counted");
    },
    slow(60_000),
  );
});
