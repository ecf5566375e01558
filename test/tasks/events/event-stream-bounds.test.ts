import { slow } from "../../support/time-factor.js";
import { readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "@keyv/redis";
import { describe, expect, it, onTestFinished } from "vitest";
import { imagesAnswer, noisePng } from "../../images/noise-png.js";
import { REDIS_URL } from "../../support/redis.js";
import { openRaw, until } from "../../support/raw-connection.js";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { openEvents } from "../sse-client.js";
import { call, expectError, submitOk, useApp, useTempDir, waitForStatus } from "../task-api.js";

/*
 * Event streams are bounded: per key and in all, a watcher that reads
 * nothing is cut, and a request for another key's task follows nothing.
 */

const eventsPath = (id: string) => `/v1/images/tasks/${id}/events`;

/** The value of one series in a scrape of the app, 0 when absent. */
async function sample(url: string, series: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((candidate) => candidate.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

describe("event stream caps", () => {
  it("refuse a key past events.maxStreamsPerKey and everyone past events.maxStreams with 429 too_many_event_streams", async () => {
    const app = await useApp({
      config: { events: { maxStreamsPerKey: 2, maxStreams: 3, slowReaderSec: 30 } },
    });
    // Tasks that stay queued while the test watches them.
    app.upstream.behave("images", { kind: "hang" });
    const mine = await submitOk(app, { model: "gpt-image-1", prompt: "mine" });
    const others = await submitOk(
      app,
      { model: "gpt-image-1", prompt: "theirs" },
      { key: TEST_KEYS.other },
    );
    const vips = await submitOk(
      app,
      { model: "gpt-image-1", prompt: "vip" },
      { key: TEST_KEYS.vip },
    );

    const first = await openEvents(app, eventsPath(mine));
    const second = await openEvents(app, eventsPath(mine));
    expect([first.status, second.status]).toEqual([200, 200]);

    // The key's share is full: the events route and a watched submission alike.
    const refused = await call(app, "GET", eventsPath(mine), {
      headers: { accept: "text/event-stream" },
    });
    expectError(refused, 429, "too_many_event_streams");
    expect(refused.body.error!.type).toBe("rate_limit_error");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const listed = async () =>
      (await call(app, "GET", "/v1/images/tasks?limit=100")).body as unknown as {
        data: unknown[];
      };
    const before = (await listed()).data.length;
    const watchedSubmission = await call(app, "POST", "/v1/images/tasks", {
      json: { model: "gpt-image-1", prompt: "refused before it exists" },
      headers: { accept: "text/event-stream" },
    });
    expectError(watchedSubmission, 429, "too_many_event_streams");
    expect((await listed()).data.length).toBe(before);

    // Another key has its own share, until the process is full.
    const third = await openEvents(app, eventsPath(others), { key: TEST_KEYS.other });
    expect(third.status).toBe(200);
    const full = await call(app, "GET", eventsPath(vips), {
      key: TEST_KEYS.vip,
      headers: { accept: "text/event-stream" },
    });
    expectError(full, 429, "too_many_event_streams");

    // A stream that ends gives its place back.
    first.close();
    await until(
      async () => (await openEvents(app, eventsPath(vips), { key: TEST_KEYS.vip })).status === 200,
      10_000,
      "a stream is taken after one closed",
    );
    expect(
      await sample(
        app.url,
        'image_task_sidecar_task_event_streams_refused_total{reason="per_key"}',
      ),
    ).toBe(2);
    expect(
      await sample(app.url, 'image_task_sidecar_task_event_streams_refused_total{reason="total"}'),
    ).toBeGreaterThanOrEqual(1);
  });
});

/** Open descriptors of this process (the service runs in it) on files under `dir`. */
function filesOpenUnder(dir: string): number {
  let count = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(join("/proc/self/fd", fd)).startsWith(dir)) count += 1;
    } catch {
      // closed meanwhile
    }
  }
  return count;
}

describe("a watcher that never reads", () => {
  it(
    "is cut after events.slowReaderSec, freeing the image file it held open",
    async () => {
      const dir = await useTempDir();
      const imagesDir = join(dir, "images");
      const app = await useApp({
        storeUrl: `sqlite://${join(dir, "tasks.db")}`,
        config: {
          images: { url: `file://${imagesDir}` },
          events: { maxStreamsPerKey: 100, maxStreams: 10_000, slowReaderSec: 2 },
        },
      });
      // Two real-size images: as base64, far more than the sockets' buffers hold.
      const answer = imagesAnswer([noisePng(2048), noisePng(2048)]);
      app.upstream.behave("images", {
        kind: "custom",
        respond: (_req, res) => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(answer);
        },
      });
      const id = await submitOk(app, {
        model: "gpt-image-1",
        prompt: "heavy",
        n: 2,
        response_format: "b64_json",
      });
      await waitForStatus(app, id, ["completed"], 60_000);

      const watcher = await openRaw(app.server.port);
      watcher.socket.pause();
      watcher.send(
        `GET ${eventsPath(id)} HTTP/1.1\r\nHost: localhost\r\n` +
          `Authorization: Bearer ${app.key}\r\nAccept: text/event-stream\r\n\r\n`,
      );
      // The stream is writing the final event, an image open, and the client takes nothing.
      await until(() => filesOpenUnder(imagesDir) > 0, 20_000, "an image file is open");
      await until(
        async () =>
          (await sample(
            app.url,
            'image_task_sidecar_task_event_watchers_cut_total{reason="slow_reader"}',
          )) === 1,
        30_000,
        "the watcher is cut",
      );
      await until(() => filesOpenUnder(imagesDir) === 0, 10_000, "the image file is closed");
      await until(
        async () => (await sample(app.url, "image_task_sidecar_task_event_watchers")) === 0,
        10_000,
        "no watcher is left",
      );
    },
    slow(120_000),
  );
});

describe("GET .../events for another key's task", () => {
  it("is 404 before anything is subscribed to", async () => {
    const app = await useApp({ redis: true });
    app.upstream.behave("images", { kind: "hang" });
    const id = await submitOk(app, { model: "gpt-image-1", prompt: "private" });

    // Every SUBSCRIBE the Redis sees, while the requests are made.
    const monitor = createClient({ url: REDIS_URL });
    await monitor.connect();
    onTestFinished(() => monitor.close().catch(() => undefined));
    const subscribes: string[] = [];
    await monitor.monitor((line: string) => {
      if (/"subscribe"/i.test(line) && line.includes(id)) subscribes.push(line);
    });

    const foreign = await call(app, "GET", eventsPath(id), {
      key: TEST_KEYS.other,
      headers: { accept: "text/event-stream" },
    });
    expectError(foreign, 404, "task_not_found");
    // The owner's stream does subscribe: the monitor sees it, and saw nothing before.
    const own = await openEvents(app, eventsPath(id));
    expect(own.status).toBe(200);
    await until(() => subscribes.length > 0, 10_000, "the owner's subscription is seen");
    expect(subscribes).toHaveLength(1);
  });
});
