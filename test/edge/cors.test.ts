import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import { pino } from "pino";
import { loadConfig, parseConfig } from "../../src/config/load-config.js";
import { startServer } from "../../src/server.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

// What a browser sends and reads, as a page of another origin would make it: the preflight
// (OPTIONS with Access-Control-Request-*), then the request with its Origin.
const PAGE = "https://app.example.com";
const CHAT = { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] };

function preflight(
  app: TestApp,
  path: string,
  origin = PAGE,
  headers = "authorization, content-type, x-stainless-os",
) {
  return fetch(`${app.url}${path}`, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": headers,
    },
  });
}

function chat(app: TestApp, headers: Record<string, string>) {
  return fetch(`${app.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(CHAT),
  });
}

describe("CORS with the default corsOrigins (any origin)", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app.close();
  });

  it("answers a preflight on an API route: 204, the method and the headers asked for", async () => {
    const response = await preflight(app, "/v1/chat/completions");
    expect(response.status).toBe(204);
    expect(response.headers.get("access-control-allow-origin")).toBe("*");
    expect(response.headers.get("access-control-allow-methods")).toBe("GET, POST, DELETE, OPTIONS");
    expect(response.headers.get("access-control-allow-headers")).toBe(
      "authorization, content-type, x-stainless-os",
    );
    expect(response.headers.get("access-control-max-age")).toBe("7200");
    expect(await response.text()).toBe("");
    // No key needed: a browser never sends one on a preflight. The channel saw nothing.
    expect(app.upstream.requests.filter((r) => r.method === "OPTIONS")).toHaveLength(0);
  });

  it("lets the page read the answer and every header of it", async () => {
    const response = await chat(app, { authorization: `Bearer ${app.key}`, origin: PAGE });
    expect(response.status).toBe(200);
    expect(response.headers.get("access-control-allow-origin")).toBe("*");
    expect(response.headers.get("access-control-expose-headers")).toBe("*");
    expect(await response.json()).toMatchObject({ object: "chat.completion" });
  });

  it("lets the page read an error too (the envelope says what went wrong)", async () => {
    const response = await chat(app, { origin: PAGE });
    expect(response.status).toBe(401);
    expect(response.headers.get("access-control-allow-origin")).toBe("*");
    expect(await response.json()).toMatchObject({ error: { code: "missing_api_key" } });
  });

  it("answers the MCP endpoint's preflight, and not the console's, /metrics' or the probes'", async () => {
    expect((await preflight(app, "/mcp")).status).toBe(204);
    for (const path of ["/console/", "/metrics", "/healthz"]) {
      const response = await fetch(`${app.url}${path}`, { headers: { origin: PAGE } });
      expect(response.headers.get("access-control-allow-origin"), path).toBeNull();
    }
  });

  it("lets a browser's MCP client initialize a session", async () => {
    const response = await fetch(`${app.url}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${app.key}`,
        origin: PAGE,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "browser", version: "1" },
        },
      }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("access-control-allow-origin")).toBe("*");
    expect(response.headers.get("access-control-expose-headers")).toBe("*");
    expect(await response.text()).toContain('"serverInfo"');
  });

  it("adds nothing to a request without Origin (a server's SDK)", async () => {
    const response = await chat(app, { authorization: `Bearer ${app.key}` });
    expect(response.status).toBe(200);
    expect(
      [...response.headers.keys()].filter((name) => name.startsWith("access-control")),
    ).toEqual([]);
  });

  it("allows no header list a preflight cannot name (the page's request then fails in the browser)", async () => {
    const response = await preflight(app, "/v1/models", PAGE, "authorization, x-a;b=c");
    expect(response.status).toBe(204);
    expect(response.headers.get("access-control-allow-headers")).toBeNull();
  });
});

describe("CORS with corsOrigins listed", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({
      config: { server: { port: 0, host: "127.0.0.1", corsOrigins: [PAGE] } },
    });
  });
  afterAll(async () => {
    await app.close();
  });

  it("answers a listed origin with itself, and Vary: Origin", async () => {
    const response = await chat(app, {
      authorization: `Bearer ${app.key}`,
      origin: "https://APP.example.com",
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("access-control-allow-origin")).toBe("https://APP.example.com");
    expect(response.headers.get("vary")).toBe("Origin");
  });

  it("gives another origin no CORS: its preflight is an ordinary request (401 without a key)", async () => {
    const response = await preflight(app, "/v1/chat/completions", "https://elsewhere.example");
    expect(response.status).toBe(401);
    expect(response.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("CORS turned off (corsOrigins: [])", () => {
  it("answers no preflight and adds no header", async () => {
    const app = await startTestApp({
      config: { server: { port: 0, host: "127.0.0.1", corsOrigins: [] } },
    });
    try {
      const response = await preflight(app, "/v1/chat/completions");
      expect(response.status).toBe(401);
      expect(response.headers.get("access-control-allow-origin")).toBeNull();
    } finally {
      await app.close();
    }
  });
});

describe("server.corsOrigins in the configuration", () => {
  const base = {
    auth: { keys: [{ key: "sk-a-test-key-0001", group: "g" }] },
    groups: { g: { models: ["*"] } },
    channels: [
      { name: "c", baseUrl: "http://127.0.0.1:9/v1", apiKey: "sk-channel-0001", models: ["m"] },
    ],
  };

  it("takes comma-separated text, as ${VAR} gives it", () => {
    const config = parseConfig({
      ...base,
      server: { corsOrigins: "https://a.example, http://localhost:3000" },
    });
    expect(config.server.corsOrigins).toEqual(["https://a.example", "http://localhost:3000"]);
  });

  it("refuses an entry that is not an origin, naming the field", () => {
    let thrown: unknown;
    try {
      parseConfig({ ...base, server: { corsOrigins: ["https://a.example/app"] } });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).problems.join("\n")).toMatch(
      /^server\.corsOrigins\[0\]: must be "\*" or an origin such as https:\/\/app\.example\.com/m,
    );
  });
});

describe("CORS on an image file", () => {
  it("keeps a browser from reusing one kind of answer for the other (Vary: Origin)", async () => {
    const app = await startTestApp();
    try {
      const submitted = await fetch(`${app.baseURL}/images/tasks`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${app.key}`,
          "content-type": "application/json",
          prefer: "wait=30",
        },
        body: JSON.stringify({
          model: "gpt-image-1",
          prompt: "a lighthouse",
          response_format: "url",
        }),
      });
      const task = (await submitted.json()) as { status: string; data?: Array<{ url: string }> };
      expect(task.status).toBe("completed");
      const link = task.data?.[0]?.url as string;

      const byImgTag = await fetch(link);
      expect(byImgTag.status).toBe(200);
      expect(byImgTag.headers.get("vary")).toBe("Origin");
      expect(byImgTag.headers.get("access-control-allow-origin")).toBeNull();

      const byPage = await fetch(link, { headers: { origin: PAGE } });
      expect(byPage.status).toBe(200);
      expect(byPage.headers.get("vary")).toBe("Origin");
      expect(byPage.headers.get("access-control-allow-origin")).toBe("*");
      expect(Buffer.from(await byPage.arrayBuffer())).toEqual(
        Buffer.from(await byImgTag.arrayBuffer()),
      );
    } finally {
      await app.close();
    }
  });
});

describe("CORS on the embedded demo defaults (npm start)", () => {
  /** The demo service as `npm start` runs it, in memory, with `env` on top. */
  async function startDemo(env: Record<string, string>) {
    const { config } = loadConfig({ env: { PORT: "0", STORE_URL: "memory://", ...env } });
    return startServer({ config, logger: pino({ level: "silent" }), defaultMetrics: false });
  }

  it("allows no other origin, as the demo key is public; CORS_ORIGINS lets one in", async () => {
    const closed = await startDemo({});
    try {
      const response = await fetch(`${closed.url}/v1/images/tasks`, {
        method: "OPTIONS",
        headers: { origin: PAGE, "access-control-request-method": "GET" },
      });
      expect(response.status).toBe(401);
      expect(response.headers.get("access-control-allow-origin")).toBeNull();
    } finally {
      await closed.close();
    }
    const open = await startDemo({ CORS_ORIGINS: `http://localhost:3000, ${PAGE}` });
    try {
      const response = await fetch(`${open.url}/v1/images/tasks`, {
        method: "OPTIONS",
        headers: { origin: PAGE, "access-control-request-method": "GET" },
      });
      expect(response.status).toBe(204);
      expect(response.headers.get("access-control-allow-origin")).toBe(PAGE);
    } finally {
      await open.close();
    }
  });
});
