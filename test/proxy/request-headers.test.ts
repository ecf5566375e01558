import { request } from "node:http";
import { gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

let app: TestApp;
beforeEach(async () => {
  app = await startTestApp();
});
afterEach(() => app.close());

const body = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] });

/** A raw request, so headers the SDK never sends (Expect, chunked bodies) can be tried. */
function send(
  headers: Record<string, string>,
  payload: Buffer | string,
  options: { chunked?: boolean; waitForContinue?: boolean } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${app.baseURL}/chat/completions`,
      { method: "POST", headers: { authorization: `Bearer ${app.key}`, ...headers } },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on("error", reject);
    if (options.waitForContinue) {
      req.on("continue", () => req.end(payload));
      return;
    }
    if (options.chunked) {
      const half = Math.floor(payload.length / 2);
      req.write(payload.slice(0, half));
      setTimeout(() => req.end(payload.slice(half)), 20);
      return;
    }
    req.end(payload);
  });
}

describe("request headers on the way to the channel", () => {
  it("with Expect: 100-continue (curl's default for large bodies) swaps the key and sends the body", async () => {
    const seen = app.upstream.nextRequest("chat");
    const answer = await send(
      { expect: "100-continue", "content-type": "application/json" },
      body,
      { waitForContinue: true },
    );
    expect(answer.status).toBe(200);
    const upstream = await seen;
    expect(upstream.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(upstream.headers.expect).toBeUndefined();
    expect(upstream.body).toEqual(JSON.parse(body));
  });

  it("sends a chunked client body on with a Content-Length and no Transfer-Encoding", async () => {
    const seen = app.upstream.nextRequest("chat");
    const answer = await send({ "transfer-encoding": "chunked" }, body, { chunked: true });
    expect(answer.status).toBe(200);
    const upstream = await seen;
    expect(upstream.headers["transfer-encoding"]).toBeUndefined();
    expect(upstream.headers["content-length"]).toBe(String(Buffer.byteLength(body)));
    expect(upstream.body).toEqual(JSON.parse(body));
  });

  it("sends a gzip-encoded client body on decoded, without its Content-Encoding", async () => {
    const seen = app.upstream.nextRequest("chat");
    const answer = await send({ "content-encoding": "gzip" }, gzipSync(body));
    expect(answer.status).toBe(200);
    const upstream = await seen;
    expect(upstream.headers["content-encoding"]).toBeUndefined();
    expect(upstream.body).toEqual(JSON.parse(body));
  });

  it("never forwards Proxy-Authorization", async () => {
    const seen = app.upstream.nextRequest("chat");
    await send({ "proxy-authorization": "Basic c2VjcmV0OnNlY3JldA==" }, body);
    expect((await seen).headers["proxy-authorization"]).toBeUndefined();
  });
});
