import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accessLineOf } from "../support/access-line-of.js";
import { openRaw, until } from "../support/raw-connection.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";
import { slow } from "../support/time-factor.js";

/*
 * The access line's `client_ip`, request by request, on connections that
 * carry several requests: the socket's peer is read once per connection,
 * and a trusted proxy's `X-Forwarded-For` is read on every request (a proxy
 * sends many clients' requests down one kept-alive connection). Linux routes
 * all of 127/8 to the loopback: 127.0.0.2 plays the proxy, 127.0.0.3 a
 * client that connects directly.
 */

type Line = Record<string, unknown>;
const lines: Line[] = [];
let app: TestApp;

beforeAll(async () => {
  const logger = pino(
    { level: "info" },
    { write: (line: string) => void lines.push(JSON.parse(line)) },
  );
  app = await startTestApp({
    logger,
    config: { server: { port: 0, host: "127.0.0.1", trustProxy: ["127.0.0.2"] } },
  });
});
afterAll(() => app.close());

/** Sends `GET /v1/models` requests on one kept-alive connection from `from`, one after another. */
async function modelsOn(from: string, requests: { id: string; forwardedFor?: string }[]) {
  const connection = await openRaw(app.server.port, from);
  for (const [index, { id, forwardedFor }] of requests.entries()) {
    connection.send(
      `GET /v1/models HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${app.key}\r\n` +
        `X-Request-Id: ${id}\r\n` +
        (forwardedFor === undefined ? "" : `X-Forwarded-For: ${forwardedFor}\r\n`) +
        "\r\n",
    );
    await until(
      () => connection.received.split("HTTP/1.1 200").length - 1 > index,
      slow(5000),
      `the answer to ${id}`,
    );
  }
}

const addressOf = async (id: string) => (await accessLineOf(lines, id)).client_ip;

describe("the access line's client address on a kept-alive connection", () => {
  it("follows a trusted proxy's X-Forwarded-For request by request, and each connection's peer", async () => {
    await modelsOn("127.0.0.2", [
      { id: "proxied-1", forwardedFor: "203.0.113.7" },
      { id: "proxied-2", forwardedFor: "198.51.100.9" },
      { id: "proxied-3" },
      { id: "proxied-4", forwardedFor: "203.0.113.8" },
    ]);
    await modelsOn("127.0.0.3", [
      { id: "direct-1", forwardedFor: "203.0.113.9" },
      { id: "direct-2" },
    ]);
    expect(await addressOf("proxied-1")).toBe("203.0.113.7");
    expect(await addressOf("proxied-2")).toBe("198.51.100.9");
    expect(await addressOf("proxied-3")).toBe("127.0.0.2");
    expect(await addressOf("proxied-4")).toBe("203.0.113.8");
    // Not a trusted proxy: its header is the client's own word, not read.
    expect(await addressOf("direct-1")).toBe("127.0.0.3");
    expect(await addressOf("direct-2")).toBe("127.0.0.3");
  });
});
