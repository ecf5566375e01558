import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import { captureLines } from "../../logging/capture-lines.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import { expectNoLeak, submitOk, useApp, waitForStatus } from "../task-api.js";

/*
 * A channel's JSON answer of several images (`n` above 1), one of which cannot be had: the others
 * were made and billed, so the task completes with them (one warning logged); only an answer none
 * of whose images can be had fails the task, as one image's answer does.
 */

const PNG = encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12).fill(9) });
const NOT_AN_IMAGE = Buffer.from("GIF89a not one of ours").toString("base64");

async function appAnswering(data: Array<{ url?: string; b64_json?: string }>) {
  const { lines, stream } = captureLines();
  const app = await useApp({ logger: pino({ level: "info" }, stream) });
  const { upstream } = app;
  // Served for good: a 403 is not tried again.
  upstream.serve("/files/gone.png", (_req, res) => {
    res.writeHead(403, { "content-type": "text/plain" }).end("gone");
  });
  upstream.serve("/files/ok.png", (_req, res) => {
    res.writeHead(200, { "content-type": "image/png" }).end(PNG);
  });
  const url = (name: string) => `${upstream.origin}/files/${name}`;
  upstream.behave("images", {
    kind: "status",
    status: 200,
    body: {
      created: 1,
      data: data.map((item) => (item.url ? { url: url(item.url) } : item)),
    },
  });
  const warnings = () =>
    lines
      .map((line) => JSON.parse(line) as { msg: string; skipped?: string })
      .filter((line) => line.msg === "skipped an image of the channel's answer");
  return { app, warnings };
}

/** `task_images_missing_total` as the service's /metrics shows it, by channel. */
async function imagesMissing(app: { url: string }): Promise<Record<string, number>> {
  const metrics = await (await fetch(`${app.url}/metrics`)).text();
  expect(metrics).toContain("# TYPE image_task_sidecar_task_images_missing_total counter");
  const lines = metrics.matchAll(
    /^image_task_sidecar_task_images_missing_total\{channel="([^"]*)"\} (\d+)$/gm,
  );
  return Object.fromEntries([...lines].map(([, channel, count]) => [channel!, Number(count)]));
}

async function ended(app: Awaited<ReturnType<typeof useApp>>, extra: Record<string, unknown> = {}) {
  const body = { prompt: "two of them", n: 2, response_format: "b64_json", ...extra };
  const done = await waitForStatus(app, await submitOk(app, body), ["completed", "failed"]);
  expectNoLeak(done.text);
  return done;
}

describe("a JSON answer of two images, one of which cannot be had", () => {
  it.each([
    ["a download that fails for good", [{ url: "ok.png" }, { url: "gone.png" }], 2],
    ["an image that is not one", [{ b64_json: NOT_AN_IMAGE }, { url: "ok.png" }], 1],
  ])("%s: the task completes with the other", async (_, data, dropped) => {
    const { app, warnings } = await appAnswering(data);
    const done = await ended(app);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.data).toHaveLength(1);
    expect(Buffer.from(done.body.data![0]!.b64_json!, "base64")).toEqual(PNG);
    expect(warnings().map((line) => line.skipped)).toEqual([
      expect.stringContaining(`image ${dropped} of 2`),
    ]);
    // Counted for the dashboards: one image asked for that the completed task does not hold,
    // by the channel that answered.
    expect(await imagesMissing(app)).toEqual({ fake: 1 });
  });

  it("neither can be had: the task fails with the first one's failure", async () => {
    const { app, warnings } = await appAnswering([{ url: "gone.png" }, { b64_json: NOT_AN_IMAGE }]);
    const done = await ended(app);
    expect(done.body.status, done.text).toBe("failed");
    expect(done.body.error?.code).toBe("upstream_error");
    expect(done.body.error?.message).toMatch(/Could not download .*status 403/);
    // Nothing was skipped: the task failed, as it says.
    expect(warnings()).toEqual([]);
    expect(await imagesMissing(app)).toEqual({ fake: 0 });
  });
});

/**
 * An OpenAI background channel whose response ends completed with two `image_generation_call`
 * items: the first holds no image, the second `PNG`. A submission that asks for a stream gets
 * the response's events, its end among them; `polls` counts the retrieves.
 */
async function backgroundChannel(): Promise<{ baseUrl: string; polls: () => number }> {
  let polls = 0;
  const response = (status: string) => ({
    id: "resp_two",
    object: "response",
    status,
    background: true,
    output:
      status === "completed"
        ? [NOT_AN_IMAGE, PNG.toString("base64")].map((result, i) => ({
            id: `ig_${i}`,
            type: "image_generation_call",
            status: "completed",
            result,
          }))
        : [],
  });
  const event = (type: string, status: string) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, response: response(status) })}\n\n`;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (req.method === "GET" && req.url?.includes("/responses/")) polls += 1;
      if (Buffer.concat(chunks).toString().includes('"stream":true')) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end(event("response.created", "queued") + event("response.completed", "completed"));
        return;
      }
      const body = response(req.method === "POST" ? "queued" : "completed");
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onTestFinished(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return { baseUrl, polls: () => polls };
}

describe("an OpenAI background response of two images, one of which is none", () => {
  it.each([
    ["polled", {}, true],
    ["streamed (partial images asked for)", { partial_images: 1 }, false],
  ])("%s: completes the task with the other", async (_, extra, polled) => {
    const { lines, stream } = captureLines();
    const channel = await backgroundChannel();
    const app = await useApp({
      logger: pino({ level: "info" }, stream),
      config: {
        channels: [
          {
            name: "background",
            baseUrl: channel.baseUrl,
            apiKey: UPSTREAM_KEY,
            models: ["gpt-image-1"],
            async: "openai-background",
            pollSec: 1,
            responsesModel: "gpt-4.1-mini",
          },
        ],
      },
    });
    const done = await ended(app, extra);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.data).toHaveLength(1);
    expect(Buffer.from(done.body.data![0]!.b64_json!, "base64")).toEqual(PNG);
    expect(channel.polls() > 0).toBe(polled);
    expect(lines.some((line) => line.includes("skipped an image of the channel's answer"))).toBe(
      true,
    );
  });
});
