import { slow } from "../support/time-factor.js";
import { request } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/config-schema.js";
import { drainedOrClosed } from "../support/drained-or-closed.js";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

// A channel's idle timeout counts the channel's silence, not the client's: a client that
// stops reading a long stream for longer than the channel's timeoutSec holds the channel
// back (backpressure all the way), and gets the whole stream once it reads on.
const EVENT = `data: {"piece":"${"y".repeat(64 * 1024 - 20)}"}\n\n`;
const EVENTS = 768; // 48 MiB: more than every socket buffer on the way
const TIMEOUT_SEC = 1;

let upstream: FakeUpstream;
let app: TestApp;
/** The longest the channel waited for the service to take more of its stream, in ms. */
let longestHeldMs = 0;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  upstream.behave("chat", {
    kind: "custom",
    async respond(_req, res) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (let i = 0; i < EVENTS && !res.destroyed; i += 1) {
        if (res.write(EVENT)) continue;
        const held = performance.now();
        await drainedOrClosed(res);
        longestHeldMs = Math.max(longestHeldMs, performance.now() - held);
      }
      res.end("data: [DONE]\n\n");
    },
  });
  app = await startTestApp({
    upstream,
    config: {
      channels: [
        {
          name: "fake",
          baseUrl: upstream.baseUrl,
          apiKey: UPSTREAM_KEY,
          models: ["gpt-4o-mini"],
          timeoutSec: TIMEOUT_SEC,
        },
      ] as ConfigInput["channels"],
    },
  });
});
afterAll(async () => {
  await app?.close();
  await upstream?.close();
});

it(
  "keeps the stream of a client that reads slower than the channel sends",
  async () => {
    const body = JSON.stringify({ model: "gpt-4o-mini", messages: [], stream: true });
    const received = await new Promise<{ bytes: number; tail: string }>((resolve, reject) => {
      const req = request(
        `${app.baseURL}/chat/completions`,
        {
          method: "POST",
          headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
        },
        (res) => {
          let bytes = 0;
          let tail = "";
          let paused = false;
          res.on("data", (chunk: Buffer) => {
            bytes += chunk.length;
            tail = (tail + chunk.toString("latin1")).slice(-64);
            if (paused) return;
            paused = true;
            // Reads nothing for well over the channel's timeout, then all of it.
            res.pause();
            void sleep(TIMEOUT_SEC * 2500).then(() => res.resume());
          });
          res.once("end", () => resolve({ bytes, tail }));
          res.once("error", reject);
        },
      );
      req.once("error", reject);
      req.end(body);
    });
    expect(received.tail.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(received.bytes).toBe(EVENT.length * EVENTS + "data: [DONE]\n\n".length);
    // The channel really was held back past its timeout, and was not cut for it.
    expect(longestHeldMs).toBeGreaterThan(TIMEOUT_SEC * 1000);
  },
  slow(30_000),
);
