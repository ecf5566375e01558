import { afterEach, describe, expect, it } from "vitest";
import { openRaw, until, type RawConnection } from "../support/raw-connection.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";
import { slow } from "../support/time-factor.js";

/*
 * `server.trustProxy` names the proxies: only a request whose peer is one of
 * them has its `X-Forwarded-For` read (from the right, skipping trusted
 * hops). The per-address cap (`maxConnectionsPerIp`, 2 here) under each form
 * of the setting, with forged headers: a client that is no proxy cannot lock
 * out another address by naming it, and a client behind a proxy cannot slip
 * out of its share by naming others before the proxy's own entry. Linux
 * routes all of 127/8 to the loopback: 127.0.0.2 plays the proxy, 127.0.0.3
 * a client that connects directly.
 */

const PROXY = "127.0.0.2";
const DIRECT = "127.0.0.3";

let app: TestApp | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function appTrusting(trustProxy: unknown): Promise<TestApp> {
  const started = await startTestApp({
    config: {
      server: { port: 0, host: "127.0.0.1", maxConnectionsPerIp: 2, trustProxy },
    },
  });
  // Every chat stays in flight until the test ends.
  started.upstream.behave("chat", { kind: "hang" });
  return started;
}

/** A chat sent from `from` on a connection of its own, `X-Forwarded-For` as given. */
async function chat(target: TestApp, from: string, forwardedFor?: string): Promise<RawConnection> {
  const connection = await openRaw(target.server.port, from);
  const body = JSON.stringify({
    model: "gpt-4o-mini",
    messages: [{ role: "user", content: "hi" }],
  });
  connection.send(
    "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n" +
      `Authorization: Bearer ${target.key}\r\nContent-Type: application/json\r\n` +
      (forwardedFor === undefined ? "" : `X-Forwarded-For: ${forwardedFor}\r\n`) +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  return connection;
}

/** Holds `count` chats in flight (the upstream has them all). */
async function hold(target: TestApp, count: number, from: string, forwardedFor?: string) {
  const before = target.upstream.requests.length;
  for (let i = 0; i < count; i += 1) await chat(target, from, forwardedFor);
  await until(
    () => target.upstream.requests.length >= before + count,
    slow(10_000),
    `${count} chats in flight`,
  );
}

/** `GET /healthz` from `from` with `X-Forwarded-For`: its status line, or "closed". */
async function health(target: TestApp, from: string, forwardedFor: string): Promise<string> {
  const connection = await openRaw(target.server.port, from);
  connection.send(
    `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: ${forwardedFor}\r\n\r\n`,
  );
  return connection.statusLine();
}

const OK = "HTTP/1.1 200 OK";
const TOO_MANY = "HTTP/1.1 429 Too Many Requests";

/** The forms that trust 127.0.0.2 and not 127.0.0.3. */
const NAMING_THE_PROXY: Array<[string, unknown]> = [
  ["a list", [PROXY]],
  ["a list of CIDRs", ["10.0.0.0/8", `${PROXY}/32`]],
  ["comma-separated text", `192.168.0.0/16, ${PROXY}`],
];

describe.each(NAMING_THE_PROXY)("server.trustProxy as %s", (_form, trustProxy) => {
  it("ignores X-Forwarded-For from a peer it does not name: 1.1.1.1, 9.9.9.9 does not lock out 9.9.9.9", async () => {
    app = await appTrusting(trustProxy);
    // The direct client holds its own two, whatever it claims to be.
    await hold(app, 2, DIRECT, "1.1.1.1, 9.9.9.9");
    expect(await health(app, DIRECT, "9.9.9.9")).toBe("closed");
    // The real 9.9.9.9, behind the proxy, is served.
    expect(await health(app, PROXY, "9.9.9.9")).toBe(OK);
  });

  it("reads it from the right behind the proxy: 9.9.9.9, 1.1.1.1 does not escape 1.1.1.1's cap", async () => {
    app = await appTrusting(trustProxy);
    await hold(app, 2, PROXY, "1.1.1.1");
    expect(await health(app, PROXY, "9.9.9.9, 1.1.1.1")).toBe(TOO_MANY);
    // A trusted hop in between is skipped: the client is still 1.1.1.1.
    expect(await health(app, PROXY, `9.9.9.9, 1.1.1.1, ${PROXY}`)).toBe(TOO_MANY);
    // Another client behind the proxy is served, and the proxy's many connections are no cap.
    expect(await health(app, PROXY, "9.9.9.9")).toBe(OK);
  });
});

describe("server.trustProxy: true (loopback and private networks)", () => {
  it("reads X-Forwarded-For from a loopback proxy: 9.9.9.9, 1.1.1.1 does not escape 1.1.1.1's cap", async () => {
    app = await appTrusting(true);
    await hold(app, 2, PROXY, "1.1.1.1");
    expect(await health(app, DIRECT, "9.9.9.9, 1.1.1.1")).toBe(TOO_MANY);
    expect(await health(app, DIRECT, "1.1.1.1, 9.9.9.9")).toBe(OK);
  });
});

describe("server.trustProxy: false (the default)", () => {
  it("counts connections per peer, whatever X-Forwarded-For says", async () => {
    app = await appTrusting(false);
    await hold(app, 2, DIRECT, "1.1.1.1, 9.9.9.9");
    // Naming another address does not get the peer a third connection ...
    expect(await health(app, DIRECT, "9.9.9.9, 1.1.1.1")).toBe("closed");
    // ... and does not lock that address out.
    expect(await health(app, PROXY, "9.9.9.9")).toBe(OK);
  });
});
