import { slow } from "../../support/time-factor.js";
import { request, type ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import type { FakeUpstream } from "../../support/fake-upstream.js";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { imagesAnswer, noisePng } from "../../images/noise-png.js";
import { openEvents, type SseStream } from "../sse-client.js";
import { STORES } from "../store-places.js";
import { cancelTask, expectError, getTask, submitOk, useApp, waitForStatus } from "../task-api.js";

const PNG_B64 = encodePng({
  width: 2,
  height: 2,
  channels: 3,
  pixels: Uint8Array.from({ length: 12 }, (_, i) => i * 20),
}).toString("base64");
const USAGE = { input_tokens: 5, output_tokens: 7, total_tokens: 12 };

/** The channel holds each generation until the test opens the gate, then answers JSON. */
function gated(upstream: FakeUpstream) {
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  upstream.behave("images", {
    kind: "custom",
    async respond(_req, res: ServerResponse) {
      await gate;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ created: 1, data: [{ b64_json: PNG_B64 }], usage: USAGE }));
    },
  });
  return () => open();
}

const eventsPath = (id: string) => `/v1/images/tasks/${id}/events`;

function expectStreamHeaders(stream: SseStream) {
  expect(stream.status).toBe(200);
  expect(stream.headers.get("content-type")).toBe("text/event-stream");
  expect(stream.headers.get("cache-control")).toBe("no-cache");
  expect(stream.headers.get("x-accel-buffering")).toBe("no");
}

describe.each(STORES)("task events on the $name store", ({ options }) => {
  it("stream a task's life in order, each event the task as GET shows it, then end", async () => {
    const app = await useApp({ ...(await options()), imageTasks: { maxConcurrent: 1 } });
    const release = gated(app.upstream);
    const blocker = await submitOk(app, { prompt: "first in line" });
    await waitForStatus(app, blocker, ["in_progress"]);

    // Submit and watch in one request: the new task's queued event comes first.
    const stream = await openEvents(app, "/v1/images/tasks", {
      method: "POST",
      json: { model: "gpt-image-1", prompt: "watched", response_format: "b64_json" },
    });
    expectStreamHeaders(stream);
    expect(stream.headers.get("location")).toMatch(/\/v1\/images\/tasks\/task_/);
    const queued = await stream.event(0);
    expect(queued).toMatchObject({ id: "0", event: "image.task.queued" });
    const id = queued.json.id as string;
    expect(queued.json).toMatchObject({
      object: "image.task",
      status: "queued",
      model: "gpt-image-1",
    });
    expect(stream.headers.get("location")).toContain(id);

    // A second watcher on the events route sees the same task from its current state.
    const watcher = await openEvents(app, eventsPath(id));
    expectStreamHeaders(watcher);
    expect((await watcher.event(0)).event).toBe("image.task.queued");

    release();
    const started = await stream.event(1);
    expect(started).toMatchObject({ id: "1.0", event: "image.task.in_progress" });
    expect(started.json.status).toBe("in_progress");
    expect(typeof started.json.started_at).toBe("number");
    const completed = await stream.event(2);
    expect(completed).toMatchObject({ id: "final", event: "image.task.completed" });
    const polled = await getTask(app, id);
    expect(completed.json).toEqual(polled.body);
    expect(completed.json.usage).toEqual(USAGE);
    await stream.ended;
    expect(stream.events).toHaveLength(3);

    await watcher.ended;
    expect(watcher.events.map((event) => event.event)).toEqual([
      "image.task.queued",
      "image.task.in_progress",
      "image.task.completed",
    ]);

    // A finished task answers its final event at once, and ends.
    const late = await openEvents(app, eventsPath(id));
    await late.ended;
    expect(late.events.map((event) => [event.id, event.event])).toEqual([
      ["final", "image.task.completed"],
    ]);
  });

  it("resume after Last-Event-ID, on a running task and on a finished one", async () => {
    const app = await useApp(await options());
    const release = gated(app.upstream);
    const id = await submitOk(app, { prompt: "resumed" });
    await waitForStatus(app, id, ["in_progress"]);

    const fresh = await openEvents(app, eventsPath(id));
    expect(await fresh.event(0)).toMatchObject({ id: "1.0", event: "image.task.in_progress" });
    const afterQueued = await openEvents(app, eventsPath(id), {
      headers: { "Last-Event-ID": "0" },
    });
    expect((await afterQueued.event(0)).id).toBe("1.0");
    const afterStart = await openEvents(app, eventsPath(id), {
      headers: { "Last-Event-ID": "1.0" },
    });
    const unknown = await openEvents(app, eventsPath(id), {
      headers: { "Last-Event-ID": "not-one-of-ours" },
    });
    expect((await unknown.event(0)).id).toBe("1.0");

    release();
    expect(await afterStart.event(0)).toMatchObject({ id: "final", event: "image.task.completed" });
    await afterStart.ended;
    expect(afterStart.events).toHaveLength(1);

    const resumed = await openEvents(app, eventsPath(id), { headers: { "Last-Event-ID": "1.0" } });
    await resumed.ended;
    expect(resumed.events.map((event) => event.id)).toEqual(["final"]);
    // The client has the final event: nothing is left, and EventSource stops on a 204.
    const over = await openEvents(app, eventsPath(id), { headers: { "Last-Event-ID": "final" } });
    expect(over.status).toBe(204);
    expect(over.events).toHaveLength(0);
  });

  it("send a cancel as image.task.failed, and refuse another key's task as GET does", async () => {
    const app = await useApp(await options());
    gated(app.upstream);
    const id = await submitOk(app, { prompt: "to be cancelled" });
    await waitForStatus(app, id, ["in_progress"]);
    const stream = await openEvents(app, eventsPath(id));
    await stream.event(0);

    const other = await openEvents(app, eventsPath(id), { key: TEST_KEYS.other });
    expect(other.status).toBe(404);
    expect(other.headers.get("content-type")).toMatch(/^application\/json/);
    expect(JSON.parse(other.text!)).toMatchObject({ error: { code: "task_not_found" } });
    const missing = await openEvents(app, eventsPath("task_AAAAAAAAAAAAAAAAAAAAAA"));
    expect(missing.status).toBe(404);
    const unauthenticated = await openEvents(app, eventsPath(id), { key: null });
    expect(unauthenticated.status).toBe(401);

    expect((await cancelTask(app, id)).body.status).toBe("failed");
    const failed = await stream.event(1);
    expect(failed).toMatchObject({ id: "final", event: "image.task.failed" });
    expect(failed.json.error).toMatchObject({ code: "cancelled" });
    await stream.ended;
  });
});

describe("task event streams", () => {
  it("write a comment at the configured interval while the task is quiet", async () => {
    const app = await useApp({ imageTasks: { eventsKeepAliveSec: 0.05 } });
    gated(app.upstream);
    const id = await submitOk(app, { prompt: "quiet" });
    const stream = await openEvents(app, eventsPath(id));
    await stream.event(0);
    const deadline = Date.now() + 5_000;
    while (stream.comments < 3 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(stream.comments).toBeGreaterThanOrEqual(3);
  });

  it(
    "never write a comment inside an event a slow reader takes in pieces",
    async () => {
      const app = await useApp({ imageTasks: { eventsKeepAliveSec: 0.05 } });
      const image = noisePng();
      app.upstream.behave("images", {
        kind: "custom",
        respond: (_req, res) => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(imagesAnswer([image]));
        },
      });
      const id = await submitOk(app, { prompt: "big" });
      await waitForStatus(app, id, ["completed"], 20_000);
      // The final event holds 4 MB of base64: a reader that pauses makes it go out in pieces,
      // with keep-alive rounds in between.
      const text = await new Promise<string>((resolve, reject) => {
        const req = request(`${app.url}${eventsPath(id)}`, {
          headers: { authorization: `Bearer ${app.key}`, accept: "text/event-stream" },
        });
        req.on("response", (res) => {
          res.pause();
          const chunks: Buffer[] = [];
          setTimeout(() => {
            res.on("data", (chunk: Buffer) => chunks.push(chunk));
            res.on("end", () => resolve(Buffer.concat(chunks).toString()));
            res.resume();
          }, 500);
        });
        req.on("error", reject);
        req.end();
      });
      const blocks = text.split("\n\n").filter((block) => block.startsWith("id: "));
      expect(blocks.map((block) => block.split("\n", 1)[0])).toEqual(["id: final"]);
      const data = blocks[0]!.split("\n").find((line) => line.startsWith("data: "))!;
      const final = JSON.parse(data.slice("data: ".length)) as {
        data: Array<{ b64_json: string }>;
      };
      expect(Buffer.from(final.data[0]!.b64_json, "base64").equals(image)).toBe(true);
    },
    slow(30_000),
  );

  it("answer an edit submitted with Accept: text/event-stream, and HEAD without a body", async () => {
    const app = await useApp();
    app.upstream.behave("edits", { kind: "ok", delayMs: 100 });
    const form = new FormData();
    form.append("model", "gpt-image-1");
    form.append("prompt", "add a hat");
    form.append("partial_images", "1");
    form.append(
      "image",
      new Blob([Buffer.from(PNG_B64, "base64")], { type: "image/png" }),
      "a.png",
    );
    const stream = await openEvents(app, "/v1/images/edits/tasks", { form });
    expectStreamHeaders(stream);
    await stream.ended;
    expect(stream.events.map((event) => event.event)).toEqual([
      "image.task.queued",
      "image.task.in_progress",
      "image.task.completed",
    ]);
    const id = stream.events[0]!.json.id as string;
    const head = await fetch(`${app.url}${eventsPath(id)}`, {
      method: "HEAD",
      headers: { authorization: `Bearer ${app.key}` },
    });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-type")).toBe("text/event-stream");
    const other = await fetch(`${app.url}${eventsPath(id)}`, {
      method: "HEAD",
      headers: { authorization: `Bearer ${TEST_KEYS.other}` },
    });
    expect(other.status).toBe(404);
  });

  it("refuse a bad submission before any stream, with the usual error", async () => {
    const app = await useApp();
    const stream = await openEvents(app, "/v1/images/tasks", {
      method: "POST",
      json: { model: "gpt-image-1", prompt: "x", partial_images: 4 },
    });
    expectError(
      {
        status: stream.status,
        headers: stream.headers,
        text: stream.text!,
        body: JSON.parse(stream.text!),
      },
      400,
      "invalid_value",
      "partial_images",
    );
  });

  it("end when the service stops, so that its clients resume elsewhere", async () => {
    const app = await useApp();
    const release = gated(app.upstream);
    const id = await submitOk(app, { prompt: "stopping" });
    const stream = await openEvents(app, eventsPath(id));
    await stream.event(0);
    const stopped = performance.now();
    // The running task gets its grace period; its watchers do not wait for it. The grace is
    // long, so that a loaded machine cannot end the stream at its end by chance; the task is
    // let through once the stream has ended, so the close does not wait it out.
    const closing = app.server.close(20_000);
    await stream.ended;
    expect(performance.now() - stopped).toBeLessThan(10_000);
    release();
    await closing;
  });
});
