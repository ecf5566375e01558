import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { Redis } from "ioredis";
import Keyv from "keyv";
import { describe, expect, it, onTestFinished } from "vitest";
import { pino } from "pino";
import { createKeyvTaskStore } from "../../src/tasks/store/keyv-task-store.js";
import { openSqliteTaskStore } from "../../src/tasks/store/open-sqlite-task-store.js";
import { createRedisTaskStore } from "../../src/tasks/store/redis-task-store.js";
import type { TaskStore } from "../../src/tasks/core/task-store.js";
import { newTaskId, type TaskRecord } from "../../src/tasks/core/task-record.js";
import { REDIS_URL, deleteKeys, uniquePrefix } from "../support/redis.js";
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
 * sweep hands over the image keys of the records it deletes.
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
        prefix,
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
    clock.now += 4 * 60_000;
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
      imageTasks: { retentionSec: 1 },
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
