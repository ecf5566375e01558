import { Redis } from "ioredis";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import type { RedisTopology } from "../../src/config/deployment.js";
import { redisKeys } from "../../src/redis/redis-keys.js";
import { newTaskId, type TaskRecord } from "../../src/tasks/core/task-record.js";
import { openTaskBackend } from "../../src/tasks/open-task-backend.js";
import { REDIS_URL, deleteKeys, listKeys, uniquePrefix } from "../support/redis.js";
import { testConfig } from "../support/start-test-app.js";
import { waitUntil } from "../tasks/task-api.js";

/*
 * The key layout of a deployment on Redis is a contract with the data already
 * there: an upgraded replica must find every key an earlier one wrote. The
 * names are spelled out here as docs/operations.md lists them (never taken
 * from the code that makes them), so a rename fails this file.
 */

const STANDALONE: RedisTopology = { mode: "standalone", url: REDIS_URL, tls: false };
const CLUSTER: RedisTopology = { mode: "cluster", nodes: [], tls: false };

describe("the Redis key layout", () => {
  it("names every key under `<prefix>::` on one server and a Sentinel set", () => {
    const keys = redisKeys("sidecar", STANDALONE);
    expect(keys.prefix).toBe("sidecar");
    const { store } = keys;
    expect([
      store.task("task_1"),
      store.idempotency("key:o", "k1"),
      store.noIdempotency,
      store.meta("url-signing-secret"),
      store.sequence,
      store.owner("key:o"),
      store.owned("in_progress", "key:o"),
      store.unfinished,
      store.expiring,
      store.expiringImages,
      store.webhookOutbox,
    ]).toEqual([
      "sidecar::task:task_1",
      "sidecar::idem:key:o:k1",
      "sidecar::idem:none",
      "sidecar::meta:url-signing-secret",
      "sidecar::sequence",
      "sidecar::owner:key:o",
      "sidecar::owned:in_progress:key:o",
      "sidecar::unfinished",
      "sidecar::expiring",
      "sidecar::expiring-images",
      "sidecar::webhook-outbox",
    ]);
    expect(keys.taskQueue).toEqual({ prefix: "sidecar::bull", name: "image-tasks" });
    expect(keys.webhookQueue).toEqual({ prefix: "sidecar::bull", name: "webhooks" });
    const { admission, events, legacy } = keys;
    expect([admission.waiting, admission.ownerWaiting("key:o"), admission.running]).toEqual([
      "sidecar::admission:waiting",
      "sidecar::admission:waiting:key:o",
      "sidecar::admission:running",
    ]);
    expect([events.cancels, events.task("task_1")]).toEqual([
      "sidecar::events",
      "sidecar::task:task_1",
    ]);
    const responses = keys.keyValue("responses");
    expect(responses.namespace).toBe("sidecar-responses");
    expect(responses.key("sidecar-responses:response-owner:r1")).toBe(
      "sidecar-responses::sidecar-responses:response-owner:r1",
    );
    expect([legacy.bytes("image", "task_1", 0), legacy.bytes("input", "task_1", 16)]).toEqual([
      "sidecar::image:task_1:0",
      "sidecar::input:task_1:16",
    ]);
    expect(legacy.bytesPattern("input")).toBe("sidecar::input:*");
    expect(legacy.taskOfBytes("sidecar::image:task_a:b:3")).toBe("task_a:b");
    expect(legacy.taskOfBytes("sidecar::task:task_1")).toBeUndefined();
    expect(legacy.taskOfBytes("other::image:task_1:0")).toBeUndefined();
  });

  it("puts the prefix in a hash tag on a Cluster (one slot), unless it holds one", () => {
    const keys = redisKeys("sidecar", CLUSTER);
    expect(keys.prefix).toBe("{sidecar}");
    expect(keys.store.task("task_1")).toBe("{sidecar}::task:task_1");
    expect(keys.taskQueue.prefix).toBe("{sidecar}::bull");
    expect(keys.keyValue("responses").namespace).toBe("{sidecar}-responses");
    expect(redisKeys("{prod}:sidecar", CLUSTER).store.sequence).toBe("{prod}:sidecar::sequence");
    expect(redisKeys("{prod}:sidecar", STANDALONE).store.sequence).toBe("{prod}:sidecar::sequence");
  });

  it("is what the backend writes: records, indexes, the ledger, both queues, entries, channels", async () => {
    const prefix = uniquePrefix("layout");
    onTestFinished(() => deleteKeys(prefix).then(() => undefined));
    const config = testConfig("http://127.0.0.1:9/v1", { redis: { prefix } });
    const backend = await openTaskBackend(config, pino({ level: "silent" }));
    onTestFinished(() => backend.close());
    const listener = new Redis(REDIS_URL);
    onTestFinished(() => void listener.disconnect());
    const heard: string[] = [];
    listener.on("message", (channel: string) => heard.push(channel));

    const owner = "key:layout";
    const record: TaskRecord = {
      id: newTaskId(),
      owner,
      status: "queued",
      model: "gpt-image-1",
      request: { prompt: "layout" },
      responseFormat: "url",
      created: Math.floor(Date.now() / 1000),
      attempts: 0,
      webhook: { url: "https://hooks.example.com/x", baseUrl: "http://localhost:8080" },
    };
    const entry = { taskId: record.id, owner };
    expect(await backend.queue.admit(entry, { maxQueued: 10, maxQueuedPerOwner: 10 })).toEqual({
      admitted: true,
    });
    const idempotency = { key: "k1", fingerprint: "f" };
    expect((await backend.store.create(record, { idempotency })).kind).toBe("created");
    await backend.queue.enqueue(entry);
    await backend.store.transition(record.id, "queued", { status: "in_progress", attempts: 1 });
    const image = { mime: "image/png", bytes: 1, key: `2030-01-01/${record.id}/0.png` };
    await backend.store.transition(
      record.id,
      "in_progress",
      { status: "completed", images: [image] },
      { ttlMs: 3_600_000 },
    );
    await backend.store.getOrSetMeta("url-signing-secret", () => "s");
    await backend.keyValue("responses", 10).set("response-owner:r1", { channel: "c" }, 60_000);
    await backend.webhooks.add({
      eventId: "evt_1",
      taskId: record.id,
      url: "https://hooks.example.com/x",
      payload: "{}",
    });
    await listener.subscribe(`${prefix}::events`, `${prefix}::task:${record.id}`);
    await backend.events.publish({ type: "cancel", taskId: record.id });
    await backend.events.publish({ type: "stage", stage: "completed", record });
    await waitUntil(() => heard.length === 2, "both channels");
    expect(heard).toEqual([`${prefix}::events`, `${prefix}::task:${record.id}`]);

    const keys = await listKeys(prefix);
    const own = keys.filter((key) => !key.startsWith(`${prefix}::bull:`));
    expect(own).toEqual(
      [
        `${prefix}-responses::${prefix}-responses:response-owner:r1`,
        `${prefix}::admission:waiting`,
        `${prefix}::admission:waiting:${owner}`,
        `${prefix}::expiring`,
        `${prefix}::expiring-images`,
        `${prefix}::idem:${owner}:k1`,
        `${prefix}::meta:url-signing-secret`,
        `${prefix}::owned:completed:${owner}`,
        `${prefix}::owner:${owner}`,
        `${prefix}::sequence`,
        `${prefix}::task:${record.id}`,
        `${prefix}::webhook-outbox`,
      ].sort(),
    );
    const queues = keys.filter((key) => key.startsWith(`${prefix}::bull:`));
    expect(queues).toContain(`${prefix}::bull:image-tasks:${record.id}`);
    expect(queues).toContain(`${prefix}::bull:webhooks:evt_1`);
    for (const key of queues) expect(key).toMatch(/::bull:(image-tasks|webhooks):/);
  });
});
