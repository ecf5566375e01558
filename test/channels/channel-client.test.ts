import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { pino } from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createChannel, type Channel } from "../../src/channels/channel.js";
import { createChannelClient, type ChannelClient } from "../../src/channels/channel-client.js";
import { ChannelError } from "../../src/channels/channel-error.js";
import { createMetrics } from "../../src/metrics/create-metrics.js";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";

// The channel client's API as its callers use it, against fake channels on real sockets:
// the answer's head first, then its body read whole, piped, or iterated as it comes (what
// a streamed image run parses its events from), under the same caps, timeout and abort.
let fake: FakeUpstream;
let client: ChannelClient;
let channel: Channel;
let deadUrl: string;

const channelAt = (name: string, baseUrl: string): Channel =>
  createChannel({
    name,
    type: "openai",
    baseUrl,
    apiKey: "sk-channel-client-test-0001",
    models: ["*"],
    priority: 0,
    weight: 1,
    timeoutSec: 1,
    imageTimeoutSec: 1,
    modelsCacheSec: 60,
    imageUrlOrigins: [],
    maxImageBytes: 1024,
    imageDelayMs: 0,
  });

const streamRequest = (signal?: AbortSignal) => ({
  route: "chat_completions",
  method: "POST" as const,
  path: "/chat/completions",
  headers: { "content-type": "application/json" },
  body: Buffer.from(JSON.stringify({ model: "gpt-4o-mini", messages: [], stream: true })),
  signal,
});

beforeAll(async () => {
  fake = await startFakeUpstream({ name: "fake" });
  channel = channelAt("fake", fake.baseUrl);
  client = createChannelClient({
    metrics: createMetrics({ defaultMetrics: false }),
    logger: pino({ level: "silent" }),
  });
  const dead = createServer();
  await new Promise<void>((resolve) => dead.listen(0, "127.0.0.1", resolve));
  deadUrl = `http://127.0.0.1:${(dead.address() as AddressInfo).port}/v1`;
  await new Promise((resolve) => dead.close(resolve));
});
beforeEach(() => fake.reset());
afterAll(async () => {
  await client?.close();
  await fake?.close();
});

describe("the channel client", () => {
  it("hands a stream's events over as they come, before the channel has finished", async () => {
    fake.holdStreams();
    const answer = await client.send([channel], streamRequest());
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toBe("text/event-stream");
    const chunks = answer.chunks();
    const first = await chunks.next();
    expect(first.value?.toString()).toContain('"role":"assistant"');
    fake.release();
    let rest = "";
    for await (const chunk of chunks) rest += chunk.toString();
    expect(rest.endsWith("data: [DONE]\n\n")).toBe(true);
  });

  it("ends an iterated stream with upstream_timeout when the channel goes silent", async () => {
    fake.behave("chat", { kind: "stall" });
    const answer = await client.send([channel], streamRequest());
    const read = (async () => {
      for await (const _chunk of answer.chunks()) {
        // the first event, then silence
      }
    })();
    await expect(read).rejects.toMatchObject({ code: "upstream_timeout" });
  });

  it("caps what an iterated stream may hold, and cuts the call past it", async () => {
    fake.behave("chat", { kind: "large", bytes: 4 * 1024 * 1024 });
    const answer = await client.send([channel], streamRequest());
    const read = (async () => {
      for await (const _chunk of answer.chunks({ maxBytes: 256 * 1024 })) {
        // drained
      }
    })();
    await expect(read).rejects.toBeInstanceOf(ChannelError);
    await expect(read).rejects.toMatchObject({ code: "invalid_response", reason: "too_large" });
  });

  it("stops reading at once when the call is aborted, and the channel sees it go", async () => {
    fake.behave("chat", { kind: "stall" });
    const abort = new AbortController();
    const answer = await client.send([channel], streamRequest(abort.signal));
    const reason = new Error("client gone");
    const read = answer.read(1024 * 1024);
    abort.abort(reason);
    await expect(read).rejects.toBe(reason);
    await expect.poll(() => fake.aborted).toBe(1);
  });

  it("decodes an answer the channel compressed though it was asked not to", async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" });
      res.end(gzipSync(JSON.stringify({ ok: true })));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const answer = await client.send([channelAt("gzip", `http://127.0.0.1:${port}/v1`)], {
        route: "models",
        method: "GET",
        path: "/models",
      });
      expect(JSON.parse((await answer.read(1024)).toString())).toEqual({ ok: true });
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("answers with the last refusal when no later channel could be reached", async () => {
    fake.behave("chat", { kind: "status", status: 429 });
    const answer = await client.send([channel, channelAt("dead", deadUrl)], streamRequest());
    expect(answer.status).toBe(429);
    expect(answer.channel.name).toBe("fake");
    expect(JSON.parse((await answer.read(64 * 1024)).toString())).toMatchObject({
      error: { message: "fake upstream answered 429" },
    });
  });

  it("throws upstream_unavailable when no channel could be reached at all", async () => {
    await expect(
      client.send([channelAt("dead", deadUrl), channelAt("dead-too", deadUrl)], streamRequest()),
    ).rejects.toMatchObject({ code: "upstream_unavailable", reason: "ECONNREFUSED" });
  });
});
