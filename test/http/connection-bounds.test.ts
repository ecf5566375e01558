import { slow } from "../support/time-factor.js";
import { afterEach, describe, expect, it } from "vitest";
import { openRaw, until, type RawConnection } from "../support/raw-connection.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

/*
 * Every connection is bounded whatever its route: a client with no key holds
 * nothing for long, by sending slowly, by sending a body no route reads, or by
 * opening many connections.
 */

let app: TestApp | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const HEALTH_WITH_BODY = (length: number) =>
  `GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${length}\r\n\r\n`;

/** Sends one byte on each open connection every second, until stopped. */
function trickle(connections: RawConnection[]): () => void {
  const timer = setInterval(() => {
    for (const connection of connections) connection.send("a");
  }, 1000);
  return () => clearInterval(timer);
}

/** The value of one series in a Prometheus scrape, 0 when absent. */
async function sample(url: string, series: string): Promise<number> {
  // A scrape refused while the cap is still full reads as nothing yet.
  const text = await fetch(`${url}/metrics`)
    .then((response) => response.text())
    .catch(() => "");
  const line = text.split("\n").find((candidate) => candidate.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

describe("a body that no route reads", () => {
  it(
    "is drained no longer than server.bodyTimeoutSec, then the connection is closed: tricklers cannot keep server.maxConnections full",
    async () => {
      app = await startTestApp({
        config: {
          server: { port: 0, host: "127.0.0.1", maxConnections: 10, bodyTimeoutSec: 5 },
        },
      });
      const { port } = app.server;
      const tricklers: RawConnection[] = [];
      for (let i = 0; i < 10; i++) tricklers.push(await openRaw(port, "127.0.0.2"));
      for (const connection of tricklers) connection.send(HEALTH_WITH_BODY(1_000_000));
      const stop = trickle(tricklers);
      try {
        // Answered at once (the route reads no body) ...
        for (const connection of tricklers) {
          expect(await connection.statusLine()).toBe("HTTP/1.1 200 OK");
        }
        // ... then closed by the service while the bytes still come, within the body's bound.
        await until(() => tricklers.every((c) => c.closed), 30_000, "every trickler is closed");
      } finally {
        stop();
      }
      // A normal client is served again.
      expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
    },
    slow(60_000),
  );

  it(
    "is drained no longer than server.bodyIdleSec once it goes silent, chunked or not",
    async () => {
      app = await startTestApp({
        config: { server: { port: 0, host: "127.0.0.1", bodyIdleSec: 2, bodyTimeoutSec: 300 } },
      });
      const { port } = app.server;
      const sized = await openRaw(port);
      sized.send(`${HEALTH_WITH_BODY(100)}0123456789`);
      const chunked = await openRaw(port);
      chunked.send(
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
      );
      expect(await sized.statusLine()).toBe("HTTP/1.1 200 OK");
      expect(await chunked.statusLine()).toBe("HTTP/1.1 200 OK");
      await until(() => sized.closed && chunked.closed, 20_000, "both connections are closed");
    },
    slow(30_000),
  );

  it("leaves a body that arrives whole alone: the connection serves its next request", async () => {
    app = await startTestApp();
    const connection = await openRaw(app.server.port);
    connection.send(`${HEALTH_WITH_BODY(5)}hello`);
    expect(await connection.statusLine()).toBe("HTTP/1.1 200 OK");
    const before = connection.received.length;
    connection.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
    await until(
      () => connection.received.slice(before).startsWith("HTTP/1.1 200 OK"),
      10_000,
      "the second answer arrives",
    );
  });
});

describe("request headers", () => {
  it(
    "must arrive within server.headersTimeoutSec: a silent connection and a trickled head get 408 and are closed",
    async () => {
      app = await startTestApp({
        config: { server: { port: 0, host: "127.0.0.1", headersTimeoutSec: 2 } },
      });
      const { port } = app.server;
      const silent = await openRaw(port);
      const slow = await openRaw(port);
      slow.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ");
      const stop = trickle([slow]);
      try {
        await until(() => silent.closed && slow.closed, 20_000, "both connections are closed");
      } finally {
        stop();
      }
      expect(slow.received).toMatch(/^HTTP\/1\.1 408 /);
      expect(slow.received).toContain('"code":"request_timeout"');
    },
    slow(30_000),
  );
});

describe("an idle keep-alive connection", () => {
  it("is closed after server.keepAliveTimeoutSec", async () => {
    app = await startTestApp({
      config: { server: { port: 0, host: "127.0.0.1", keepAliveTimeoutSec: 1 } },
    });
    const connection = await openRaw(app.server.port);
    connection.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
    expect(await connection.statusLine()).toBe("HTTP/1.1 200 OK");
    expect(connection.received).toMatch(/keep-alive/i);
    await until(() => connection.closed, 10_000, "the idle connection is closed");
  });
});

describe("server.maxConnectionsPerIp", () => {
  it(
    "closes an address's connections past the cap at once, serves the rest, and other addresses alike",
    async () => {
      app = await startTestApp({
        config: { server: { port: 0, host: "127.0.0.1", maxConnectionsPerIp: 20 } },
      });
      const { port } = app.server;
      const flood: RawConnection[] = [];
      for (let i = 0; i < 25; i++) flood.push(await openRaw(port, "127.0.0.2"));
      await until(
        () => flood.filter((c) => c.closed).length === 5,
        10_000,
        "five connections are closed",
      );
      const open = flood.filter((c) => !c.closed);
      expect(open).toHaveLength(20);
      for (const connection of open) {
        connection.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
        expect(await connection.statusLine()).toBe("HTTP/1.1 200 OK");
      }
      // Another address is not held back by the first.
      const other = await openRaw(port, "127.0.0.3");
      other.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
      expect(await other.statusLine()).toBe("HTTP/1.1 200 OK");
      expect(
        await sample(app.url, 'image_task_sidecar_connections_refused_total{reason="per_ip"}'),
      ).toBe(5);

      // Once some close, the address gets in again.
      for (const connection of open.slice(0, 3)) connection.socket.destroy();
      await until(
        async () => {
          const again = await openRaw(port, "127.0.0.2");
          again.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
          return (await again.statusLine()) === "HTTP/1.1 200 OK";
        },
        10_000,
        "a new connection from the address is served",
      );
    },
    slow(30_000),
  );

  it(
    "behind a trusted proxy counts requests in flight per address the proxy names (the last X-Forwarded-For entry)",
    async () => {
      app = await startTestApp({
        config: {
          server: { port: 0, host: "127.0.0.1", trustProxy: true, maxConnectionsPerIp: 2 },
        },
      });
      app.upstream.behave("chat", { kind: "hang" });
      const controller = new AbortController();
      const chat = (forwardedFor: string) =>
        fetch(`${app!.baseURL}/chat/completions`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${app!.key}`,
            "content-type": "application/json",
            "x-forwarded-for": forwardedFor,
          },
          body: JSON.stringify({
            model: "gpt-4o-mini",
            messages: [{ role: "user", content: "hi" }],
          }),
          signal: controller.signal,
        });
      try {
        const held = [chat("203.0.113.9"), chat("198.51.100.1, 203.0.113.9")];
        for (const request of held) request.catch(() => undefined);
        await until(() => app!.upstream.requests.length >= 2, 10_000, "two requests are in flight");

        // The client named a different first hop: what counts is what the proxy appended.
        const refused = await chat("192.0.2.77, 203.0.113.9");
        expect(refused.status).toBe(429);
        expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
        expect(await refused.json()).toMatchObject({
          error: { code: "too_many_connections", type: "rate_limit_error" },
        });
        // Another client behind the same proxy is served.
        expect(
          (await fetch(`${app.url}/healthz`, { headers: { "x-forwarded-for": "203.0.113.10" } }))
            .status,
        ).toBe(200);
      } finally {
        controller.abort();
      }
      // Once its requests end, the address is served again.
      await until(
        async () =>
          (await fetch(`${app!.url}/healthz`, { headers: { "x-forwarded-for": "203.0.113.9" } }))
            .status === 200,
        10_000,
        "the address is served again",
      );
    },
    slow(30_000),
  );
});

describe("the metrics listener", () => {
  it("has a small cap of its own", async () => {
    app = await startTestApp({ config: { metrics: { port: 0, host: "127.0.0.1" } } });
    const port = Number(new URL(app.server.metricsUrl!).port);
    const held: RawConnection[] = [];
    for (let i = 0; i < 40; i++) held.push(await openRaw(port));
    await until(() => held.filter((c) => c.closed).length === 8, 10_000, "eight are closed");
    for (const connection of held) connection.socket.destroy();
    await until(
      async () =>
        (await sample(
          app!.server.metricsUrl!,
          'image_task_sidecar_connections_refused_total{reason="metrics_listener"}',
        )) >= 8,
      10_000,
      "the refusals are counted",
    );
  });
});
