import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

// How the service talks to a channel at the connection level: a base URL with its own path
// prefix, pooled keep-alive connections, none kept past what the channel announces, and a
// pooled connection the channel drops after the request reached it: not sent again (the
// channel may have run it), but answered 502.
const ANSWER = JSON.stringify({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 0,
  model: "gpt-4o-mini",
  choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
});

interface Seen {
  url: string;
  host: string | undefined;
  authorization: string | undefined;
  /** Which connection it came on, counted from 1. */
  connection: number;
}

let channel: Server;
let app: TestApp;
let seen: Seen[] = [];
let connections = 0;
/** Requests on a reused connection that the channel drops unanswered, once each. */
let dropReused = 0;
/** The service's start-up check of the channel has been answered, on this connection. */
let checked = false;
let checkConnection = 0;
/** The connections the channel has open, by number. */
const open = new Set<number>();
/**
 * The channel's keep-alive (sent as `Keep-Alive: timeout=60`): the service's pools keep an idle
 * connection about that long, so the check's connection is still there when the calls are made.
 */
const KEEP_ALIVE_MS = 60_000;

beforeAll(async () => {
  const numbers = new WeakMap<Socket, { id: number; requests: number }>();
  channel = createServer((req: IncomingMessage, res: ServerResponse) => {
    const socket = numbers.get(req.socket) as { id: number; requests: number };
    socket.requests += 1;
    // The service's model-list check at start-up: answered, not counted among the calls.
    if (req.headers["user-agent"]?.includes("(model-list check)")) {
      checkConnection = socket.id;
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [] }), () => (checked = true));
      return;
    }
    if (socket.requests > 1 && dropReused > 0) {
      dropReused -= 1;
      req.socket.destroy();
      return;
    }
    req.resume();
    req.on("end", () => {
      seen.push({
        url: req.url ?? "",
        host: req.headers.host,
        authorization: req.headers.authorization,
        connection: socket.id,
      });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(ANSWER);
    });
  });
  channel.on("connection", (socket: Socket) => {
    connections += 1;
    const id = connections;
    numbers.set(socket, { id, requests: 0 });
    open.add(id);
    socket.once("close", () => open.delete(id));
  });
  channel.keepAliveTimeout = KEEP_ALIVE_MS;
  await new Promise<void>((resolve) => channel.listen(0, "127.0.0.1", resolve));
  const { port } = channel.address() as AddressInfo;
  app = await startTestApp({
    config: {
      channels: [
        {
          name: "prefixed",
          baseUrl: `http://127.0.0.1:${port}/openai/deployments/v1/`,
          apiKey: UPSTREAM_KEY,
          models: ["gpt-4o-mini"],
        },
      ],
    },
  });
  // Its connection is idle (and kept alive) before the calls the tests count.
  while (!checked) await new Promise((resolve) => setTimeout(resolve, 10));
});
beforeEach(() => {
  seen = [];
  dropReused = 0;
});
afterAll(async () => {
  await app.close();
  channel.closeAllConnections();
  await new Promise((resolve) => channel.close(resolve));
});

const chat = () =>
  fetch(`${app.baseURL}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
  });

describe("calls to a channel", () => {
  it("never go on the connection of the channel's model-list check", async () => {
    for (let i = 0; i < 3; i += 1) {
      const response = await chat();
      expect(response.status).toBe(200);
      await response.arrayBuffer();
    }
    expect(checkConnection).toBeGreaterThan(0);
    // Open all along, idle in a pool: the calls could have gone on it, and did not.
    expect(open.has(checkConnection), "the check's connection is still open").toBe(true);
    expect(seen).toHaveLength(3);
    expect(seen.map((request) => request.connection)).not.toContain(checkConnection);
  });

  it("go to the channel's own path prefix with its Host and key", async () => {
    const response = await chat();
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ id: "chatcmpl-1" });
    const { port } = channel.address() as AddressInfo;
    expect(seen).toMatchObject([
      {
        url: "/openai/deployments/v1/chat/completions",
        host: `127.0.0.1:${port}`,
        authorization: `Bearer ${UPSTREAM_KEY}`,
      },
    ]);
  });

  it("reuse pooled connections one after another", async () => {
    for (let i = 0; i < 5; i += 1) {
      const response = await chat();
      expect(response.status).toBe(200);
      await response.arrayBuffer();
    }
    expect(new Set(seen.map((request) => request.connection)).size).toBe(1);
  });

  it("are not sent again when the channel drops a pooled connection after the request", async () => {
    // Make sure a pooled connection is there to be reused.
    await (await chat()).arrayBuffer();
    dropReused = 1;
    const before = connections;
    const response = await chat();
    expect(response.status).toBe(502);
    expect(await response.json()).toMatchObject({ error: { code: "invalid_response" } });
    expect(dropReused).toBe(0);
    expect(connections).toBe(before);
    expect(seen).toHaveLength(1);
  });

  it("do not reuse a connection the channel announced it would close within two seconds", async () => {
    channel.keepAliveTimeout = 1_000; // sent as Keep-Alive: timeout=1
    try {
      for (let i = 0; i < 3; i += 1) {
        const response = await chat();
        expect(response.status).toBe(200);
        await response.arrayBuffer();
      }
      expect(new Set(seen.map((request) => request.connection)).size).toBe(3);
    } finally {
      channel.keepAliveTimeout = KEEP_ALIVE_MS;
    }
  });
});
