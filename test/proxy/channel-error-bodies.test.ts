import type { IncomingMessage, ServerResponse } from "node:http";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { expectError } from "../http/error-envelope.js";
import { UPSTREAM_KEY } from "../support/start-test-app.js";
import { appWith, messages, postChat, rawChannel, upstream } from "./channel-harness.js";

/**
 * A tenth of the second a held answer's rest is still read: had the service dropped that
 * connection before answering, the channel has seen it closed by then.
 */
const settled = () => new Promise((resolve) => setTimeout(resolve, 100));

// A channel's error answer reaches the client as an OpenAI envelope: its own when it has one
// (scrubbed of the key), this service's otherwise, never HTML.
describe("channel error bodies", () => {
  const html = (status: number) => (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(status, { "content-type": "text/html; charset=utf-8" });
    res.end(`<!DOCTYPE html><html><body><h1>Error ${status}</h1><p>cloudflare</p></body></html>`);
  };

  it("turns a channel's HTML 5xx page into a 502 upstream_unavailable envelope", async () => {
    const app = await appWith([{ name: "cdn", baseUrl: await rawChannel(html(502)) }]);
    const error = await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages }),
      502,
      "upstream_unavailable",
    );
    expect(error.message).toContain("502");
  });

  it("turns a CDN's HTML 524 timeout page into a 504 upstream_timeout envelope", async () => {
    const app = await appWith([{ name: "cdn", baseUrl: await rawChannel(html(524)) }]);
    await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages, stream: true }),
      504,
      "upstream_timeout",
    );
  });

  it("keeps a channel's HTML 429 a 429, with its Retry-After, for the SDK to back off", async () => {
    const app = await appWith([
      {
        name: "cdn",
        baseUrl: await rawChannel((_req, res) => {
          res.writeHead(429, { "content-type": "text/html", "retry-after": "7" });
          res.end("<html><body>Too Many Requests</body></html>");
        }),
      },
    ]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    expect(response.headers.get("retry-after")).toBe("7");
    await expectError(response, 429, "upstream_rate_limited");
  });

  it("turns a channel's non-OpenAI 4xx body into a 502 upstream_unavailable envelope", async () => {
    const app = await appWith([
      {
        name: "wrong-path",
        baseUrl: await rawChannel((_req, res) => {
          res.writeHead(404, { "content-type": "text/plain" });
          res.end("404 page not found");
        }),
      },
    ]);
    await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages }),
      502,
      "upstream_unavailable",
    );
  });

  it("removes the channel's key from an error body that echoes it, keeping status and code", async () => {
    const only = await upstream("only");
    only.behave("chat", {
      kind: "status",
      status: 401,
      body: {
        error: {
          message: `Incorrect API key provided: ${UPSTREAM_KEY}.`,
          type: "invalid_request_error",
          param: null,
          code: "invalid_api_key",
        },
      },
    });
    const app = await appWith([{ name: "only", baseUrl: only.baseUrl }]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    const error = await expectError(response, 401, "invalid_api_key");
    expect(error.message).toMatch(/^Incorrect API key provided: /);
  });

  it("removes the key from a gzip-compressed error body too", async () => {
    const body = JSON.stringify({
      error: { message: `bad key ${UPSTREAM_KEY}`, type: "server_error", param: null, code: "x" },
    });
    const app = await appWith([
      {
        name: "gzip",
        baseUrl: await rawChannel((_req, res) => {
          res.writeHead(500, { "content-type": "application/json", "content-encoding": "gzip" });
          res.end(gzipSync(body));
        }),
      },
    ]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    const error = await expectError(response, 500, "x");
    expect(error.message).toMatch(/^bad key /);
  });

  it("passes an error held open (never ended after its JSON) on at once", async () => {
    let held: ServerResponse | undefined;
    const app = await appWith([
      {
        name: "held",
        baseUrl: await rawChannel((_req, res) => {
          held = res;
          res.writeHead(400, { "content-type": "application/json" });
          res.write(
            '{"error":{"message":"Bad input.","type":"invalid_request_error","param":null,"code":"bad"}}',
          );
        }),
      },
    ]);
    // Passed on at the JSON's end: not after the channel's timeout (600 s), and not after the
    // second in which the rest is still read (in the background, for the connection's reuse).
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    await settled();
    expect(held?.socket?.destroyed).toBe(false);
    const error = await expectError(response, 400, "bad");
    expect(error.message).toBe("Bad input.");
    // The held answer is dropped after that second: its connection is closed.
    await expect.poll(() => held?.socket?.destroyed ?? true, { timeout: 5_000 }).toBe(true);
  });

  it("tries the next channel at once after a refusal held open (never ended after its JSON)", async () => {
    const next = await upstream("next");
    let held: ServerResponse | undefined;
    const app = await appWith([
      {
        name: "held",
        baseUrl: await rawChannel((_req, res) => {
          held = res;
          res.writeHead(429, { "content-type": "application/json" });
          res.write('{"error":{"message":"Slow down.","type":"requests","code":"rate_limited"}}');
        }),
      },
      { name: "next", baseUrl: next.baseUrl, priority: 1 },
    ]);
    const started = Date.now();
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    expect(response.status).toBe(200);
    expect(next.requests).toHaveLength(1);
    // Not after the refusal's end (the channel's timeout, 600 s), nor after the second its
    // rest is still read in the background.
    await settled();
    expect(held?.socket?.destroyed).toBe(false);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
