import { slow, slowSec } from "../support/time-factor.js";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { Redis } from "ioredis";
import Keyv from "keyv";
import { describe, expect, it, onTestFinished } from "vitest";
import { pino } from "pino";
import { redisKeys } from "../../src/redis/redis-keys.js";
import { createKeyvTaskStore } from "../../src/tasks/store/keyv-task-store.js";
import { openSqliteTaskStore } from "../../src/tasks/store/open-sqlite-task-store.js";
import { createRedisTaskStore } from "../../src/tasks/store/redis-task-store.js";
import type { TaskStore } from "../../src/tasks/core/task-store.js";
import { newTaskId, type TaskRecord } from "../../src/tasks/core/task-record.js";
import { REDIS_URL, deleteKeys, uniquePrefix } from "../support/redis.js";
import { S3_CREDENTIALS, startS3Server } from "../support/s3-server.js";
import { STORES } from "../tasks/store-places.js";
import {
  getTask,
  submitOk,
  useApp,
  useTempDir,
  waitForStatus,
  waitUntil,
} from "../tasks/task-api.js";

/*
 * A task's images go from the image store when the task expires: each store's
 * sweep hands over the image keys of the records it deletes, within the bound
 * the docs give (about 5 s past the task's expiry).
 */

type Clock = { now: number };

const BACKENDS: Array<{ name: string; open: (clock: Clock) => Promise<TaskStore> }> = [
  {
    name: "memory",
    open: async (clock) =>
      createKeyvTaskStore(new Keyv(), {
        persistent: false,
        idempotencyTtlMs: 60_000,
        now: () => clock.now,
      }),
  },
  {
    name: "sqlite",
    open: async (clock) =>
      (
        await openSqliteTaskStore(join(await useTempDir(), "drop.db"), {
          idempotencyTtlMs: 60_000,
          logger: pino({ level: "silent" }),
          now: () => clock.now,
        })
      ).store,
  },
  {
    name: "redis",
    open: async (clock) => {
      const prefix = uniquePrefix("drop");
      const client = new Redis(REDIS_URL);
      onTestFinished(async () => {
        await client.quit();
        await deleteKeys(prefix);
      });
      return createRedisTaskStore({
        client,
        keys: redisKeys(prefix, { mode: "standalone", url: REDIS_URL, tls: false }).store,
        idempotencyTtlMs: 60_000,
        now: () => clock.now,
      });
    },
  },
];

describe.each(BACKENDS)("the sweep of expired tasks ($name)", ({ open }) => {
  it("hands over the image keys of what it deletes, results and inputs, once", async () => {
    const clock = { now: Date.now() };
    const store = await open(clock);
    await store.sweepExpired();
    const record: TaskRecord = {
      id: newTaskId(),
      owner: "key:drop",
      status: "queued",
      model: "gpt-image-1",
      kind: "edit",
      request: { prompt: "drop me" },
      inputs: [{ field: "image", mime: "image/png", bytes: 3, key: "2030-01-01/t/input-0.png" }],
      responseFormat: "url",
      created: Math.floor(clock.now / 1000),
      attempts: 0,
    };
    await store.create(record);
    await store.transition(record.id, "queued", { status: "in_progress", attempts: 1 });
    await store.transition(
      record.id,
      "in_progress",
      {
        status: "completed",
        expires_at: Math.floor(clock.now / 1000) + 60,
        images: [{ mime: "image/png", bytes: 5, key: "2030-01-01/t/0.png" }],
      },
      { ttlMs: 60_000 },
    );
    const dropped: string[] = [];
    const drop = async (keys: string[]) => {
      dropped.push(...keys);
    };
    clock.now += 30_000; // not expired yet
    await store.sweepExpired(drop);
    expect(dropped).toEqual([]);
    // 2.5 s past its expiry (60 s): every store has handed the keys over by then.
    clock.now += 32_500;
    await store.sweepExpired(drop);
    expect(dropped.sort()).toEqual(["2030-01-01/t/0.png", "2030-01-01/t/input-0.png"]);
    await store.sweepExpired(drop);
    expect(dropped).toHaveLength(2);
    expect(await store.get(record.id)).toBeUndefined();
    await store.close();
  });
});

describe("an expired task's images on Redis", () => {
  it("leave the image store with the task", async () => {
    const dir = await useTempDir();
    const images = join(dir, "images");
    const app = await useApp({
      redis: true,
      // A second on an idle machine: a stall longer than the retention between the task's end
      // and the first look would find it (and its files) already gone.
      imageTasks: { retentionSec: slowSec(1) },
      config: { images: { url: `file://${images}` } },
    });
    const id = await submitOk(app, { prompt: "short-lived", n: 2, response_format: "url" });
    await waitForStatus(app, id, ["completed"]);
    const files = async () =>
      (await readdir(images, { recursive: true }).catch(() => [])).filter((f) =>
        f.endsWith(".png"),
      );
    expect(await files()).toHaveLength(2);
    await waitUntil(async () => (await getTask(app, id)).status === 404, "the task to expire");
    await waitUntil(async () => (await files()).length === 0, "its images to be deleted", 15_000);
  });
});

describe.each(STORES)("an expired task's images in S3 ($name)", ({ options }) => {
  it(
    "are deleted within about 5 s of the task's expiry",
    async () => {
      const s3 = await startS3Server();
      onTestFinished(() => s3.close());
      const prefix = `expiry-${newTaskId().slice(5, 13)}`;
      const app = await useApp({
        ...(await options()),
        imageTasks: { retentionSec: 2 },
        config: { images: s3.imagesConfig(prefix) },
      });
      const client = new S3Client({
        endpoint: s3.endpoint,
        region: "us-east-1",
        forcePathStyle: true,
        credentials: { ...S3_CREDENTIALS },
      });
      onTestFinished(() => client.destroy());
      const objects = async () =>
        (await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: `${prefix}/` })))
          .Contents?.length ?? 0;
      const id = await submitOk(app, { prompt: "short-lived", n: 2, response_format: "url" });
      const done = await waitForStatus(app, id, ["completed"]);
      expect(await objects()).toBe(2);
      const expiresAtMs = done.body.expires_at! * 1000;
      await waitUntil(async () => (await objects()) === 0, "its images to be deleted", 20_000);
      // The docs' bound (5 s), and 2 s for a busy machine and `expires_at`'s whole seconds.
      expect(Date.now() - expiresAtMs).toBeLessThan(slow(7_000));
    },
    slow(30_000),
  );
});
