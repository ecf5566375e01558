import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it, onTestFinished } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import {
  expectNoLeak,
  submitOk,
  useApp,
  waitForStatus,
  waitUntil,
  type ApiResponse,
} from "../task-api.js";

// What a hostile or broken channel answers to an image task, and what the service does with it.

const fixture = (name: string) =>
  readFileSync(new URL(`../../fixtures/images/${name}`, import.meta.url));
const PNG = encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12) });
const MiB = 1024 * 1024;

/** An app in front of its own fake channel, with channel fields merged in. */
async function appWithChannel(channel: Record<string, unknown> = {}) {
  const upstream = await startFakeUpstream();
  onTestFinished(() => upstream.close());
  const app = await useApp({
    upstream,
    config: {
      channels: [
        {
          name: "fake",
          baseUrl: upstream.baseUrl,
          apiKey: UPSTREAM_KEY,
          models: ["gpt-image-1"],
          ...channel,
        },
      ],
    },
  });
  return { app, upstream };
}

/** Another server on loopback that must never be reached; counts what reaches it. */
async function startCanary() {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.writeHead(200, { "content-type": "image/png" }).end(PNG);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  return { hits, port, url: `http://127.0.0.1:${port}` };
}

/** Writes `chunk` until the client goes away; resolves with the bytes written by then. */
function writeForever(res: ServerResponse, chunk: Buffer): Promise<number> {
  return new Promise((resolve) => {
    let written = 0;
    const pump = () => {
      while (!res.destroyed) {
        written += chunk.length;
        if (!res.write(chunk)) return void res.once("drain", pump);
      }
    };
    res.once("close", () => resolve(written));
    pump();
  });
}

async function failedWith(app: Awaited<ReturnType<typeof useApp>>, id: string) {
  const done = await waitForStatus(app, id, ["completed", "failed"], 20_000);
  expectNoLeak(done.text);
  expect(done.body.status, done.text).toBe("failed");
  return done.body.error!;
}

describe("a channel's answer is read within bounds", () => {
  it("cuts an endless b64_json answer at what n images may take, and fails the task", async () => {
    const { app, upstream } = await appWithChannel({ maxImageBytes: MiB });
    let written: Promise<number> | undefined;
    upstream.behave("images", {
      kind: "custom",
      respond: (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write(`{"created":1,"data":[{"b64_json":"${PNG.subarray(0, 9).toString("base64")}`);
        written = writeForever(res, Buffer.alloc(64 * 1024, "A"));
      },
    });
    const id = await submitOk(app, { prompt: "endless" });
    const error = await failedWith(app, id);
    expect(error.code).toBe("invalid_response");
    expect(error.message).toMatch(/larger than \d+ bytes/);
    // The service hung up soon after the limit (a few socket buffers), instead of reading on.
    expect(await written).toBeLessThan(16 * MiB);
  });

  it("refuses an answer whose Content-Length is over the limit without reading it", async () => {
    const { app, upstream } = await appWithChannel({ maxImageBytes: MiB });
    upstream.behave("images", {
      kind: "custom",
      respond: (_req, res) => {
        res.writeHead(200, { "content-type": "application/json", "content-length": 200 * MiB });
        res.write('{"data":[{"b64_json":"');
        // and then nothing: a client that waited for 200 MiB would hang
      },
    });
    const id = await submitOk(app, { prompt: "announced huge" });
    expect((await failedWith(app, id)).code).toBe("invalid_response");
  });

  it("refuses one b64_json image over maxImageBytes, though it is a PNG", async () => {
    const { app, upstream } = await appWithChannel({ maxImageBytes: 64 * 1024 });
    const big = Buffer.concat([PNG, Buffer.alloc(128 * 1024)]);
    upstream.behave("images", {
      kind: "status",
      status: 200,
      body: { created: 1, data: [{ b64_json: big.toString("base64") }] },
    });
    const id = await submitOk(app, { prompt: "one big image" });
    const error = await failedWith(app, id);
    expect(error.code).toBe("invalid_response");
    expect(error.message).toMatch(/image larger than 65536 bytes/);
  });

  it("refuses more images than were asked for", async () => {
    const { app, upstream } = await appWithChannel();
    upstream.behave("images", {
      kind: "status",
      status: 200,
      body: {
        created: 1,
        data: Array.from({ length: 5 }, () => ({ b64_json: PNG.toString("base64") })),
      },
    });
    const id = await submitOk(app, { prompt: "asked for two", n: 2 });
    expect((await failedWith(app, id)).code).toBe("invalid_response");
  });

  it("accepts n images of up to maxImageBytes each", async () => {
    const { app, upstream } = await appWithChannel({ maxImageBytes: 256 * 1024 });
    const big = Buffer.concat([PNG, Buffer.alloc(200 * 1024, 1)]);
    upstream.behave("images", {
      kind: "status",
      status: 200,
      body: {
        created: 1,
        data: Array.from({ length: 3 }, () => ({ b64_json: big.toString("base64") })),
      },
    });
    const id = await submitOk(app, { prompt: "three big ones", n: 3 });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.data).toHaveLength(3);
  });
});

describe("image URLs in a channel's answer", () => {
  function answerUrls(upstream: FakeUpstream, ...urls: string[]) {
    upstream.behave("images", {
      kind: "status",
      status: 200,
      body: { created: 1, data: urls.map((url) => ({ url })) },
    });
  }

  it("cuts an endless chunked image download at maxImageBytes", async () => {
    const { app, upstream } = await appWithChannel({ maxImageBytes: MiB });
    let written: Promise<number> | undefined;
    upstream.serve("/files/endless.png", (_req, res) => {
      res.writeHead(200, { "content-type": "image/png" });
      res.write(PNG.subarray(0, 16));
      written = writeForever(res, Buffer.alloc(64 * 1024));
    });
    answerUrls(upstream, `${upstream.origin}/files/endless.png`);
    const id = await submitOk(app, { prompt: "endless image" });
    const error = await failedWith(app, id);
    expect(error.code).toBe("invalid_response");
    expect(error.message).toMatch(/image larger than 1048576 bytes/);
    expect(await written).toBeLessThan(16 * MiB);
  });

  it("never fetches the service's own /metrics (another origin on loopback)", async () => {
    const { app, upstream } = await appWithChannel();
    answerUrls(upstream, `${app.url}/metrics`);
    const id = await submitOk(app, { prompt: "ssrf to metrics" });
    const error = await failedWith(app, id);
    expect(error.code).toBe("invalid_response");
    expect(error.message).toMatch(/neither the channel's origin nor in its imageUrlOrigins/);
    // Requests are counted once answered: this scrape is the first /metrics request there was.
    const metrics = await (await fetch(`${app.url}/metrics`)).text();
    expect(metrics).not.toMatch(/http_requests_total\{route="\/metrics"/);
  });

  it("never follows a redirect from the channel's origin, to loopback or anywhere", async () => {
    const { app, upstream } = await appWithChannel();
    const canary = await startCanary();
    upstream.serve("/files/moved.png", (_req, res) => {
      res.writeHead(302, { location: `${canary.url}/latest/meta-data/` }).end();
    });
    answerUrls(upstream, `${upstream.origin}/files/moved.png`);
    const id = await submitOk(app, { prompt: "redirected" });
    const error = await failedWith(app, id);
    expect(error.code).toBe("invalid_response");
    expect(error.message).toMatch(/redirects \(status 302\); redirects are not followed/);
    expect(canary.hits).toEqual([]);
  });

  it("never follows a redirect of the generation call itself (the prompt stays put)", async () => {
    const { app, upstream } = await appWithChannel();
    const canary = await startCanary();
    upstream.behave("images", {
      kind: "custom",
      respond: (_req, res) => {
        res.writeHead(307, { location: `${canary.url}/v1/images/generations` }).end();
      },
    });
    const id = await submitOk(app, { prompt: "secret prompt" });
    const error = await failedWith(app, id);
    expect(error.code).toBe("invalid_response");
    expect(canary.hits).toEqual([]);
  });

  it("refuses an allow-listed origin that resolves to loopback, at connect time", async () => {
    const canary = await startCanary();
    const { app, upstream } = await appWithChannel({
      imageUrlOrigins: [`http://localhost:${canary.port}`, `http://127.0.0.1:${canary.port}`],
    });
    for (const host of ["localhost", "127.0.0.1"]) {
      answerUrls(upstream, `http://${host}:${canary.port}/image.png`);
      const id = await submitOk(app, { prompt: `allow-listed ${host}` });
      const error = await failedWith(app, id);
      expect(error.code, host).toBe("invalid_response");
      expect(error.message, host).toMatch(/is a loopback address/);
    }
    expect(canary.hits).toEqual([]);
  });

  it("refuses non-http URLs and origins outside the allow-list without a request", async () => {
    const canary = await startCanary();
    const { app, upstream } = await appWithChannel({
      imageUrlOrigins: ["https://cdn.example.com"],
    });
    for (const url of [
      "file:///etc/passwd",
      `${canary.url}/x.png`,
      `http://2130706433:${canary.port}/x.png`,
      "https://cdn.example.com.evil.example/x.png",
    ]) {
      answerUrls(upstream, url);
      const id = await submitOk(app, { prompt: url });
      expect((await failedWith(app, id)).code, url).toBe("invalid_response");
    }
    expect(canary.hits).toEqual([]);
  });

  /** Serves `/files/blip.png`: each of `statuses` in turn, then the PNG; counts the GETs. */
  function serveAfter(upstream: FakeUpstream, statuses: number[]) {
    const seen = { gets: 0 };
    upstream.serve("/files/blip.png", (_req, res) => {
      seen.gets += 1;
      const status = statuses.shift();
      if (status) res.writeHead(status, { "content-type": "text/plain" }).end("not here");
      else res.writeHead(200, { "content-type": "image/png" }).end(PNG);
    });
    answerUrls(upstream, `${upstream.origin}/files/blip.png`);
    return seen;
  }

  it("tries a download that fails as a blip does again: the paid image is kept", async () => {
    const { app, upstream } = await appWithChannel();
    const seen = serveAfter(upstream, [404, 503]);
    const id = await submitOk(app, { prompt: "not there yet", response_format: "b64_json" });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expect(Buffer.from(done.body.data![0]!.b64_json!, "base64")).toEqual(PNG);
    expect(seen.gets).toBe(3);
    // The image, paid for, is downloaded again; never generated again.
    expect(upstream.requests.filter((r) => r.path.endsWith("/generations"))).toHaveLength(1);
  });

  it.each([
    [502, 3],
    [403, 1],
  ])("a download answered %i for good fails the task after %i tries", async (status, tries) => {
    const { app, upstream } = await appWithChannel();
    const seen = serveAfter(upstream, [status, status, status, status]);
    const id = await submitOk(app, { prompt: `always ${status}` });
    const error = await failedWith(app, id);
    expect(error.code).toBe("upstream_error");
    expect(error.message).toMatch(new RegExp(`Could not download .*status ${status}`));
    expect(seen.gets).toBe(tries);
    expect(upstream.requests.filter((r) => r.path.endsWith("/generations"))).toHaveLength(1);
  });

  it.each([
    ["a PNG held open (a proxy that never sends the last chunk)", PNG, ""],
    ["a JPEG followed by junk, then held open", fixture("progressive.jpeg"), "junk \xff\xd9"],
    ["a WebP followed by another, then held open", fixture("lossy.webp"), "RIFF\0\0\0\0WEBP"],
  ])(
    "%s: the task completes with the image, and the download is closed",
    async (_, image, after) => {
      const { app, upstream } = await appWithChannel();
      let closed = false;
      upstream.serve("/files/held", (req, res) => {
        res.writeHead(200, { "content-type": "application/octet-stream" });
        res.write(Buffer.concat([image, Buffer.from(after, "latin1")]));
        req.socket.once("close", () => (closed = true));
      });
      answerUrls(upstream, `${upstream.origin}/files/held`);
      const id = await submitOk(app, { prompt: "held download", response_format: "b64_json" });
      // Far below the channel's image timeout (600 s): the download ends at the image's end.
      const done = await waitForStatus(app, id, ["completed", "failed"], 5_000);
      expect(done.body.status, done.text).toBe("completed");
      expect(Buffer.from(done.body.data![0]!.b64_json!, "base64")).toEqual(image);
      await waitUntil(() => closed, "the download closed", 5_000);
    },
  );
});

describe("the channel's key never reaches a client through a task", () => {
  /** The key in the ways a channel could echo it in JSON: plain, `\/`-free `\u` escapes. */
  const escaped = UPSTREAM_KEY.replace(/-/g, "\\u002d").replace(/s/g, "\\u0073");

  async function answerRaw(upstream: FakeUpstream, status: number, raw: string) {
    upstream.behave("images", {
      kind: "custom",
      respond: (_req: IncomingMessage, res: ServerResponse) => {
        res.writeHead(status, { "content-type": "application/json" }).end(raw);
      },
    });
  }

  function expectScrubbed(done: ApiResponse) {
    expect(done.text).not.toContain(UPSTREAM_KEY);
    expect(done.text).not.toContain(UPSTREAM_KEY.slice(3));
    expect(done.text).toContain("[redacted]");
  }

  it("scrubs revised_prompt and every string of usage, keys included", async () => {
    const { app, upstream } = await appWithChannel();
    await answerRaw(
      upstream,
      200,
      `{"created":1,"data":[{"b64_json":"${PNG.toString("base64")}",` +
        `"revised_prompt":"called with ${escaped}"}],` +
        `"usage":{"total_tokens":3,"note":"${UPSTREAM_KEY}",` +
        `"details":[{"${escaped}":"x"},"key=${escaped}"]}}`,
    );
    const id = await submitOk(app, { prompt: "echo" });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expectScrubbed(done);
    expect(done.body.data![0]!.revised_prompt).toBe("called with [redacted]");
    expect(done.body.usage).toEqual({
      total_tokens: 3,
      note: "[redacted]",
      details: [{ "[redacted]": "x" }, "key=[redacted]"],
    });
  });

  it("scrubs the code, type and message of a channel's error, escaped or not", async () => {
    const { app, upstream } = await appWithChannel();
    await answerRaw(
      upstream,
      400,
      `{"error":{"message":"Incorrect API key provided: ${escaped}",` +
        `"type":"t_${UPSTREAM_KEY}","code":"c_${escaped}"}}`,
    );
    const id = await submitOk(app, { prompt: "bad key" });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status).toBe("failed");
    expectScrubbed(done);
    expect(done.body.error).toEqual({
      code: "c_[redacted]",
      type: "t_[redacted]",
      message: "Incorrect API key provided: [redacted]",
    });
  });
});
