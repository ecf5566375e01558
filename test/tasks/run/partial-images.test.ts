import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { captureLines } from "../../logging/capture-lines.js";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import { openEvents, type SseStream } from "../sse-client.js";
import { STORES } from "../store-places.js";
import {
  flatPng,
  scriptImageStream,
  STREAM_USAGE,
  type ScriptedRequest,
} from "../scripted-image-stream.js";
import { getTask, useApp, useTempDir, waitUntil, type TaskJson } from "../task-api.js";
import { slowSec } from "../../support/time-factor.js";

type PartialView = TaskJson & {
  partial_images?: Array<{ index: number; url?: string; b64_json?: string }>;
  partial_image_index?: number;
};

const submitStream = (app: { url: string; key: string }, body: Record<string, unknown>) =>
  openEvents(app, "/v1/images/tasks", {
    json: { model: "gpt-image-1", prompt: "a lighthouse", ...body },
  });

async function fetchBytes(url: string): Promise<Buffer> {
  const response = await fetch(url);
  expect(response.status, url).toBe(200);
  expect(response.headers.get("content-type")).toBe("image/png");
  return Buffer.from(await response.arrayBuffer());
}

const view = (stream: SseStream, index: number) =>
  stream.event(index).then((event) => ({ ...event, task: event.json as unknown as PartialView }));

describe.each(STORES)("partial images on the $name store", ({ options }) => {
  it("stream each partial image as the channel sends it, shown by GET and fetchable, then the result", async () => {
    const app = await useApp(await options());
    const channel = scriptImageStream(app.upstream);
    const stream = await submitStream(app, { partial_images: 2, response_format: "url" });
    const request = await channel.next();
    expect(request.body).toMatchObject({ stream: true, partial_images: 2 });
    const id = (await view(stream, 0)).task.id;
    expect((await view(stream, 1)).id).toBe("1.0");

    request.partial(0, 40);
    const first = await view(stream, 2);
    expect(first).toMatchObject({ id: "1.1", event: "image.task.partial_image" });
    expect(first.task).toMatchObject({ status: "in_progress", partial_image_index: 0 });
    expect(first.task.partial_images?.map((p) => p.index)).toEqual([0]);
    expect((await fetchBytes(first.task.partial_images![0]!.url!)).equals(flatPng(40))).toBe(true);
    const polled = (await getTask(app, id)).body as PartialView;
    expect(polled.partial_images?.map((p) => p.index)).toEqual([0]);

    // A watcher that joins now gets the start and the partial image so far; one resuming
    // after the first partial image gets only what follows.
    const late = await openEvents(app, `/v1/images/tasks/${id}/events`);
    expect((await late.event(1)).id).toBe("1.1");
    const resumed = await openEvents(app, `/v1/images/tasks/${id}/events`, {
      headers: { "Last-Event-ID": "1.1" },
    });

    request.partial(1, 80);
    const second = await view(stream, 3);
    expect(second).toMatchObject({ id: "1.2", event: "image.task.partial_image" });
    expect(second.task.partial_images?.map((p) => p.index)).toEqual([0, 1]);
    expect((await fetchBytes(second.task.partial_images![1]!.url!)).equals(flatPng(80))).toBe(true);
    expect((await resumed.event(0)).id).toBe("1.2");

    request.complete(250);
    const done = await view(stream, 4);
    expect(done).toMatchObject({ id: "final", event: "image.task.completed" });
    expect(done.task.usage).toEqual(STREAM_USAGE);
    expect((await fetchBytes(done.task.data![0]!.url!)).equals(flatPng(250))).toBe(true);
    await stream.ended;
    expect(stream.events.map((event) => event.event)).toEqual([
      "image.task.queued",
      "image.task.in_progress",
      "image.task.partial_image",
      "image.task.partial_image",
      "image.task.completed",
    ]);
    expect((await getTask(app, id)).body).toEqual(done.task);
  });

  it("shows partial images as b64_json for a b64_json task", async () => {
    const app = await useApp(await options());
    const channel = scriptImageStream(app.upstream);
    const stream = await submitStream(app, { partial_images: 1 });
    const request = await channel.next();
    await stream.event(1);
    request.partial(0, 33);
    const partial = await view(stream, 2);
    const b64 = partial.task.partial_images?.[0]?.b64_json;
    expect(Buffer.from(b64 ?? "", "base64").equals(flatPng(33))).toBe(true);
    request.complete();
    expect((await view(stream, 3)).task.data?.[0]?.b64_json).toBe(flatPng(250).toString("base64"));
  });
});

describe.each(STORES)("partial images on the $name store", ({ options }) => {
  it("are deleted with their task when it expires, and their links die with it", async () => {
    const images = join(await useTempDir(), "images");
    // A second on an idle machine: a stall longer than the retention between the task's end
    // and the first look would find it (and its files) already gone.
    const retentionSec = slowSec(1);
    const app = await useApp({
      ...(await options()),
      imageTasks: { retentionSec },
      config: { images: { url: `file://${images}` } },
    });
    const channel = scriptImageStream(app.upstream);
    const stream = await submitStream(app, { partial_images: 2, response_format: "url" });
    const request = await channel.next();
    request.partial(0);
    request.partial(1);
    const partial = (await view(stream, 3)).task.partial_images![1]!.url!;
    // Signed while the task ran: as long as the task could last, past its actual expiry.
    expect(Number(new URL(partial).searchParams.get("expires"))).toBeGreaterThan(
      Date.now() / 1000 + 60,
    );
    request.complete();
    await stream.ended;
    const kept = await fetch(partial);
    expect(kept.status).toBe(200);
    // No cache keeps it past the task's expiry (retentionSec after it finished).
    const maxAge = /^private, max-age=(\d+)$/.exec(kept.headers.get("cache-control") ?? "");
    expect(Number(maxAge?.[1])).toBeLessThanOrEqual(retentionSec + 1);
    const files = async () =>
      (await readdir(images, { recursive: true }).catch(() => [])).filter((f) =>
        f.endsWith(".png"),
      );
    expect((await files()).sort()).toEqual([
      expect.stringMatching(/\/0\.png$/),
      expect.stringMatching(/\/partial-0\.png$/),
      expect.stringMatching(/\/partial-1\.png$/),
    ]);
    const id = stream.events[0]!.json.id as string;
    await waitUntil(async () => (await getTask(app, id)).status === 404, "the task to expire");
    expect((await fetch(partial)).status).toBe(404);
    await waitUntil(async () => (await files()).length === 0, "its images to go", 15_000);
  });
});

/** A task of two images with partial images, submitted: its events, and the channel's request. */
async function twoImagesStreamed(options: Parameters<typeof useApp>[0] = {}) {
  const app = await useApp(options);
  const channel = scriptImageStream(app.upstream);
  const body = { n: 2, partial_images: 1, response_format: "b64_json" };
  const stream = await submitStream(app, body);
  return { stream, request: await channel.next() };
}

/**
 * The stream's last event, a task completed with one image (the flat PNG of shade 250) of two,
 * and the one warning of what was `dropped`.
 */
function completedWithOne(stream: SseStream, lines: string[], dropped: string): PartialView {
  const last = stream.events.at(-1)!;
  expect(last.event, JSON.stringify(last.json)).toBe("image.task.completed");
  const task = last.json as unknown as PartialView;
  expect(task.data).toHaveLength(1);
  expect(Buffer.from(task.data![0]!.b64_json!, "base64").equals(flatPng(250))).toBe(true);
  const warned = lines.filter((line) => line.includes("skipped an image of the channel's answer"));
  expect(warned).toHaveLength(1);
  expect(warned[0]).toContain(dropped);
  return task;
}

describe("streamed runs", () => {
  it("take a plain JSON answer to a stream request: no partial images, the same result", async () => {
    const app = await useApp();
    const channel = scriptImageStream(app.upstream);
    const stream = await submitStream(app, { partial_images: 3 });
    (await channel.next()).answerJson(250);
    await stream.ended;
    expect(stream.events.map((event) => event.event)).toEqual([
      "image.task.queued",
      "image.task.in_progress",
      "image.task.completed",
    ]);
    expect(stream.events[2]!.json.usage).toEqual(STREAM_USAGE);
  });

  it("fail invalid_response when the stream breaks off, and never call a second channel", async () => {
    const [first, second] = [await startFakeUpstream(), await startFakeUpstream()];
    onTestFinished(async () => {
      await first.close();
      await second.close();
    });
    const channel = (upstream: FakeUpstream, name: string, priority: number) => ({
      name,
      baseUrl: upstream.baseUrl,
      apiKey: UPSTREAM_KEY,
      models: ["gpt-image-1"],
      priority,
    });
    const app = await useApp({
      upstream: first,
      config: { channels: [channel(first, "first", 1), channel(second, "second", 2)] },
    });
    const scripted = scriptImageStream(first);
    const stream = await submitStream(app, { partial_images: 2 });
    const request = await scripted.next();
    request.partial(0);
    await stream.event(2);
    request.breakOff();
    const failed = await stream.event(3);
    expect(failed).toMatchObject({ id: "final", event: "image.task.failed" });
    expect((failed.json as unknown as PartialView).error?.code).toBe("invalid_response");
    // The first channel may have run (and billed) it: the second is never asked.
    const generations = (upstream: FakeUpstream) =>
      upstream.requests.filter((r) => r.path.endsWith("/images/generations")).length;
    expect([generations(first), generations(second)]).toEqual([1, 0]);
  });

  it.each([
    ["breaks off", (request: ScriptedRequest) => request.breakOff()],
    ["sends an error event", (request: ScriptedRequest) => request.fail("server_error")],
  ])("keep the images completed before the stream %s (n: 2)", async (_, end) => {
    const { lines, stream: logs } = captureLines();
    const { stream, request } = await twoImagesStreamed({ logger: pino({ level: "info" }, logs) });
    request.partial(0);
    request.image(250);
    // Past the tick the response's socket is corked for: the image is on the wire before the end.
    await new Promise((resolve) => setTimeout(resolve, 50));
    end(request);
    await stream.ended;
    const task = completedWithOne(stream, lines, "the stream's end after 1 of 2 images");
    expect(task.usage).toEqual(STREAM_USAGE);
  });

  it("keep the second image when the first of two completed is none (n: 2)", async () => {
    const { lines, stream: logs } = captureLines();
    const { stream, request } = await twoImagesStreamed({ logger: pino({ level: "info" }, logs) });
    request.notAnImage();
    request.complete(250);
    await stream.ended;
    const task = completedWithOne(stream, lines, "image 1 of 2 (invalid_response)");
    // Both were billed.
    expect(task.usage?.total_tokens).toBe(2 * STREAM_USAGE.total_tokens);
  });

  it("fail a stream at the task's timeout, the images completed before it too", async () => {
    const { stream, request } = await twoImagesStreamed({ imageTasks: { timeoutSec: 1 } });
    request.image(250);
    const failed = await stream.event(2, 10_000);
    expect((failed.json as unknown as PartialView).error?.code).toBe("timeout");
    await request.gone;
  });

  it("end a stalled stream at the task's timeout", async () => {
    const app = await useApp({ imageTasks: { timeoutSec: 1 } });
    const channel = scriptImageStream(app.upstream);
    const stream = await submitStream(app, { partial_images: 2 });
    const request = await channel.next();
    request.partial(0);
    const failed = await stream.event(3, 10_000);
    expect((failed.json as unknown as PartialView).error?.code).toBe("timeout");
    await request.gone;
  });

  it("stream an edit's partial images from the channel's /images/edits", async () => {
    const app = await useApp();
    const channel = scriptImageStream(app.upstream, "edits");
    const form = new FormData();
    form.append("model", "gpt-image-1");
    form.append("prompt", "add a hat");
    form.append("partial_images", "1");
    form.append("response_format", "url");
    form.append("image", new Blob([flatPng(1)], { type: "image/png" }), "a.png");
    const stream = await openEvents(app, "/v1/images/edits/tasks", { form });
    const request = await channel.next();
    expect(request.body).toMatchObject({ stream: "true", partial_images: "1" });
    request.partial(0, 70);
    const partial = await view(stream, 2);
    expect((await fetchBytes(partial.task.partial_images![0]!.url!)).equals(flatPng(70))).toBe(
      true,
    );
    request.complete();
    expect((await stream.event(3)).event).toBe("image.task.completed");
  });

  it("stop the channel's stream on cancel, seen as image.task.failed", async () => {
    const app = await useApp();
    const channel = scriptImageStream(app.upstream);
    const stream = await submitStream(app, { partial_images: 2 });
    const request = await channel.next();
    request.partial(0);
    const id = (await stream.event(2)).json.id as string;
    await fetch(`${app.url}/v1/images/tasks/${id}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}` },
    });
    expect((await stream.event(3)).json.error).toMatchObject({ code: "cancelled" });
    await request.gone;
  });
});
