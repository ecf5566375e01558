import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/config-schema.js";
import { expectError } from "../http/error-envelope.js";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function fake(name: string): Promise<FakeUpstream> {
  const upstream = await startFakeUpstream({ name });
  cleanups.push(() => upstream.close());
  return upstream;
}

async function appWith(...baseUrls: string[]): Promise<TestApp> {
  const app = await startTestApp({
    upstream: await fake("unused"),
    config: {
      channels: baseUrls.map((baseUrl, index) => ({
        name: `channel-${index}`,
        baseUrl,
        apiKey: UPSTREAM_KEY,
        priority: index,
        models: ["gpt-4o-mini"],
      })) as ConfigInput["channels"],
    },
  });
  cleanups.push(() => app.close());
  return app;
}

const body = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] });

/** A raw request on `agent`, with `headers`; resolves status and body. */
function post(
  app: TestApp,
  headers: Record<string, string>,
  agent: Agent | false,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${app.baseURL}/chat/completions`,
      {
        method: "POST",
        agent,
        headers: {
          authorization: `Bearer ${app.key}`,
          "content-type": "application/json",
          ...headers,
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("hop-by-hop headers", () => {
  it("answers clients that send Connection: close (nginx's default) mixed with keep-alive ones, every time", async () => {
    const upstream = await fake("one");
    const app = await appWith(upstream.baseUrl);
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 2 });
    cleanups.push(async () => keepAlive.destroy());
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const answer = await post(
        app,
        i % 2 === 0 ? { connection: "close" } : {},
        i % 3 === 0 ? false : keepAlive,
      );
      statuses.push(answer.status);
    }
    const concurrent = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        post(app, i % 2 ? { connection: "close" } : {}, keepAlive),
      ),
    );
    statuses.push(...concurrent.map((answer) => answer.status));
    expect(statuses.every((status) => status === 200)).toBe(true);
    expect(upstream.requests.every((r) => r.headers.connection !== "close")).toBe(true);
  });

  it("never passes a channel's hop-by-hop headers, or the ones its Connection names, to the client", async () => {
    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, {
          "content-type": "application/json",
          connection: "keep-alive, x-request-id",
          "keep-alive": "timeout=5",
          "x-request-id": "named-by-connection",
          "proxy-authenticate": "Basic",
          upgrade: "h2c",
          trailer: "x-checksum",
          "x-ratelimit-remaining-requests": "99",
        });
        res.end(JSON.stringify({ id: "x", object: "chat.completion", choices: [] }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    );
    const app = await appWith(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`);
    const answer = await post(app, {}, false);
    expect(answer.status).toBe(200);
    for (const name of ["x-upstream-request-id", "proxy-authenticate", "upgrade", "trailer"]) {
      expect(answer.headers[name], name).toBeUndefined();
    }
    // The service's own request id, whatever the channel's Connection named.
    expect(answer.headers["x-request-id"]).not.toBe("named-by-connection");
    expect(answer.headers["keep-alive"]).not.toBe("timeout=5");
    expect(answer.headers["x-ratelimit-remaining-requests"]).toBe("99");
  });
});

describe("redirects from a channel", () => {
  it("are never followed nor handed on: 502 invalid_response, nothing reaches the target", async () => {
    const target = await fake("target");
    const redirecting = await fake("redirecting");
    redirecting.behave("chat", {
      kind: "redirect",
      status: 307,
      location: `${target.baseUrl}/chat/completions`,
    });
    const app = await appWith(redirecting.baseUrl);
    const response = await fetch(`${app.baseURL}/chat/completions`, {
      method: "POST",
      redirect: "manual",
      headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
      body,
    });
    expect(response.headers.get("location")).toBeNull();
    await expectError(response, 502, "invalid_response");
    expect(target.requests).toHaveLength(0);
  });

  it("are not sent on to the next channel: the channel may have acted on the request", async () => {
    const redirecting = await fake("redirecting");
    const second = await fake("second");
    redirecting.behave("chat", { kind: "redirect", status: 302, location: "http://127.0.0.1:9/" });
    const app = await appWith(redirecting.baseUrl, second.baseUrl);
    const answer = await post(app, {}, false);
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: "invalid_response" } });
    expect(redirecting.requests).toHaveLength(1);
    expect(second.requests).toHaveLength(0);
  });
});
