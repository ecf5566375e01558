import { leaseSec } from "../../support/time-factor.js";
import type { ServerResponse } from "node:http";
import { pino } from "pino";
import { afterAll, describe, expect, it, onTestFinished } from "vitest";
import { openRedisClient } from "../../../src/redis/open-redis-client.js";
import { redisKeys } from "../../../src/redis/redis-keys.js";
import { type TaskEvent } from "../../../src/tasks/core/task-events.js";
import { createRedisTaskEvents } from "../../../src/tasks/events/redis-task-events.js";
import type { TaskRecord } from "../../../src/tasks/core/task-record.js";
import { startFakeUpstream } from "../../support/fake-upstream.js";
import { deleteKeys, startPrivateRedis, uniquePrefix } from "../../support/redis.js";
import { PNG_B64 } from "./replica-cluster.js";
import { flatPng, scriptImageStream } from "../scripted-image-stream.js";
import { openEvents } from "../sse-client.js";
import { cancelTask, submitOk, useApp, waitForStatus, waitUntil } from "../task-api.js";

const upstream = await startFakeUpstream();
afterAll(() => upstream.close());

/** Replicas of one deployment: apps in this process on one Redis prefix, each with its own bus. */
async function replica(prefix: string) {
  return useApp({ upstream, redis: { prefix }, imageTasks: { leaseSec: leaseSec(2) } });
}

function usePrefix() {
  const prefix = uniquePrefix("events");
  onTestFinished(() => deleteKeys(prefix).then(() => undefined));
  return prefix;
}

describe("task events across replicas on Redis", () => {
  it("reach a watcher on replica B of a task that replica A runs, and A's cancel too", async () => {
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    upstream.behave("images", {
      kind: "custom",
      async respond(_req, res: ServerResponse, body) {
        // "held" answers when the gate opens; "cancelled" never does.
        const { prompt } = body as { prompt?: string };
        await (prompt === "held" ? gate : new Promise(() => undefined));
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ created: 1, data: [{ b64_json: PNG_B64 }] }));
      },
    });
    const prefix = usePrefix();
    const a = await replica(prefix);
    const held = await submitOk(a, { prompt: "held" });
    const cancelled = await submitOk(a, { prompt: "cancelled" });
    await waitForStatus(a, held, ["in_progress"]);
    await waitForStatus(a, cancelled, ["in_progress"]);
    // B starts once A runs both tasks: B only watches.
    const b = await replica(prefix);

    const watched = await openEvents(b, `/v1/images/tasks/${held}/events`);
    expect(await watched.event(0)).toMatchObject({ id: "1.0", event: "image.task.in_progress" });
    const resumed = await openEvents(b, `/v1/images/tasks/${held}/events`, {
      headers: { "Last-Event-ID": "1.0" },
    });
    open();
    const done = await watched.event(1);
    expect(done).toMatchObject({ id: "final", event: "image.task.completed" });
    expect(done.json.id).toBe(held);
    await watched.ended;
    expect((await resumed.event(0)).id).toBe("final");

    // A cancels the task it runs; B hears it.
    const cancelWatch = await openEvents(b, `/v1/images/tasks/${cancelled}/events`);
    await cancelWatch.event(0);
    await cancelTask(a, cancelled);
    expect(await cancelWatch.event(1)).toMatchObject({ event: "image.task.failed", id: "final" });
    expect((await cancelWatch.event(1)).json.error).toMatchObject({ code: "cancelled" });
  });

  it("answer a stream submitted on either replica, whichever runs the task", async () => {
    upstream.behave("images", { kind: "ok", delayMs: 200 });
    const prefix = usePrefix();
    const [a, b] = [await replica(prefix), await replica(prefix)];
    for (const target of [a, b]) {
      const stream = await openEvents(target, "/v1/images/tasks", {
        method: "POST",
        json: { model: "gpt-image-1", prompt: `submitted on ${target.url}` },
      });
      await stream.ended;
      expect(stream.events.map((event) => event.event)).toEqual([
        "image.task.queued",
        "image.task.in_progress",
        "image.task.completed",
      ]);
    }
  });
});

describe("partial images across replicas on Redis", () => {
  it("reach a watcher on replica B, their links served by B, of a run on replica A", async () => {
    const prefix = usePrefix();
    const a = await replica(prefix);
    const channel = scriptImageStream(upstream);
    const id = await submitOk(a, { prompt: "drafts", partial_images: 2, response_format: "url" });
    const request = await channel.next();
    await waitForStatus(a, id, ["in_progress"]);
    const b = await replica(prefix);
    const watched = await openEvents(b, `/v1/images/tasks/${id}/events`);
    expect((await watched.event(0)).id).toBe("1.0");
    request.partial(0, 90);
    const partial = await watched.event(1);
    expect(partial).toMatchObject({ id: "1.1", event: "image.task.partial_image" });
    const url = new URL(
      (partial.json as { partial_images: Array<{ url: string }> }).partial_images[0]!.url,
    );
    expect(url.origin).toBe(new URL(b.url).origin);
    const image = await fetch(url);
    expect(Buffer.from(await image.arrayBuffer()).equals(flatPng(90))).toBe(true);
    request.complete();
    expect((await watched.event(2)).event).toBe("image.task.completed");
  });
});

describe("the Redis bus", () => {
  const record = (id: string): TaskRecord => ({
    id,
    owner: "o",
    status: "completed",
    model: "gpt-image-1",
    request: {},
    responseFormat: "url",
    created: 0,
    attempts: 1,
  });

  it("tells its own process at once, others the tasks they listen to, sends what Redis missed once it is back, and asks for a resync", async () => {
    const redis = await startPrivateRedis();
    onTestFinished(() => redis.close());
    const logger = pino({ level: "silent" });
    const topology = { mode: "standalone", url: redis.url, tls: false } as const;
    const open = async () => {
      const { client } = await openRedisClient({ url: redis.url, topology, logger });
      const channels = redisKeys("bus", topology).events;
      const events = await createRedisTaskEvents({ client, channels, logger });
      const heard: Array<{ event: TaskEvent; local: boolean }> = [];
      events.subscribe((event, local) => heard.push({ event, local }));
      onTestFinished(async () => {
        await events.close();
        client.disconnect();
      });
      return { events, heard, client };
    };
    const [a, b] = [await open(), await open()];
    // B hears the stages of the tasks it listens to, and every cancel.
    for (const id of ["task_1", "task_2", "task_3"]) await b.events.listen(id).ready;
    await a.events.publish({ type: "stage", stage: "completed", record: record("task_0") });
    await a.events.publish({ type: "cancel", taskId: "task_0" });

    await a.events.publish({ type: "stage", stage: "completed", record: record("task_1") });
    await waitUntil(() => b.heard.length === 2, "B hears A's events");
    expect(b.heard.map(({ event, local }) => [event.type, local])).toEqual([
      ["cancel", false],
      ["stage", false],
    ]);
    expect(a.heard.map(({ event, local }) => [event.type, local])).toEqual([
      ["stage", true],
      ["cancel", true],
      ["stage", true],
    ]);

    await redis.stop();
    const failing = a.events.publish({ type: "stage", stage: "failed", record: record("task_2") });
    await expect(failing).rejects.toThrow();
    // Heard here all the same.
    expect(a.heard.at(-1)!.event).toMatchObject({ stage: "failed" });
    await redis.start();
    // B was cut off: it is told so (its watchers read their tasks again).
    await waitUntil(() => b.heard.some(({ event }) => event.type === "resync"), "a resync", 15_000);
    await waitUntil(() => a.client.status === "ready", "A's connection back", 15_000);
    await a.events.publish({ type: "stage", stage: "completed", record: record("task_3") });
    await waitUntil(
      () => b.heard.some(({ event }) => event.type === "stage" && event.record.id === "task_3"),
      "B hears A's next event",
    );
    // What A could not send went out before it (B hears it unless it went while B was away).
    const ids = b.heard.flatMap(({ event }) => (event.type === "stage" ? [event.record.id] : []));
    expect(ids.slice(-1)).toEqual(["task_3"]);
    expect(ids.filter((id) => id !== "task_2")).toEqual(["task_1", "task_3"]);
    expect(a.heard.filter(({ event }) => event.type === "stage")).toHaveLength(4);
  });
});
