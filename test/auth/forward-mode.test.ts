import { Writable } from "node:stream";
import { SignJWT } from "jose";
import OpenAI from "openai";
import type { Logger } from "pino";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ConfigInput } from "../../src/config/config-schema.js";
import { parseConfig } from "../../src/config/load-config.js";
import { createLogger } from "../../src/logging/create-logger.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { expectError, sdkError } from "../http/error-envelope.js";
import { startFakeGateway, type FakeGateway } from "../support/fake-gateway.js";
import { TEST_KEYS, UPSTREAM_KEY } from "../support/start-test-app.js";

/** Keys the fake new-api knows, and what each may use (unsorted, with a duplicate). */
const ALICE = "sk-newapi-alice-0123456789abcdef";
const BOB = "sk-newapi-bob-0123456789abcdef";
const GATEWAY_KEYS = {
  [ALICE]: ["gpt-image-1", "gpt-4o-mini", "dall-e-3", "gpt-4o-mini"],
  [BOB]: ["gpt-4o"],
  // The sidecar's own channel key, for configured keys' calls and glob listings.
  [UPSTREAM_KEY]: ["gpt-4o-mini", "gpt-4o", "gpt-image-1", "dall-e-3"],
};
const UNKNOWN = "sk-newapi-nobody-0123456789abcdef";
const JWT_SECRET = "forward-test-jwt-secret-0123456789";
const FORWARD_SECRET = "forward-test-secret-0123456789abcdef-xyz";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function gateway(): Promise<FakeGateway> {
  const started = await startFakeGateway(GATEWAY_KEYS);
  cleanups.push(() => started.close());
  return started;
}

interface ForwardAppOptions {
  forward?: Record<string, unknown>;
  /** The gateway channel's `models`; default `["*"]`. */
  models?: string[];
  /** The gateway channel's own key; default none (only forward keys reach it). */
  apiKey?: string;
  logger?: Logger;
  /** Point the channel somewhere else (a closed port). */
  baseUrl?: string;
}

interface ForwardApp {
  server: RunningServer;
  baseURL: string;
}

/** The real service in front of `gw`, with configured keys, HS256 JWTs and forward mode. */
async function forwardApp(gw: FakeGateway, options: ForwardAppOptions = {}): Promise<ForwardApp> {
  const input: ConfigInput = {
    server: { port: 0, host: "127.0.0.1", shutdownGraceSec: 1 },
    store: { url: "memory://" },
    auth: {
      keys: [{ key: TEST_KEYS.default, group: "default" }],
      jwt: { secret: JWT_SECRET, groupClaim: "group" },
      forward: { channel: "newapi", secret: FORWARD_SECRET, ...options.forward },
    },
    groups: { default: { models: ["gpt-4o-mini", "gpt-image-*"] } },
    channels: [
      {
        name: "newapi",
        baseUrl: options.baseUrl ?? gw.baseUrl,
        ...(options.apiKey ? { apiKey: options.apiKey } : {}),
        models: options.models ?? ["*"],
      },
    ],
    logging: { level: "silent" },
  };
  const server = await startServer({
    config: parseConfig(input),
    logger: options.logger ?? pino({ level: "silent" }),
    defaultMetrics: false,
  });
  cleanups.push(() => server.close(500));
  return { server, baseURL: `${server.url}/v1` };
}

function client(app: ForwardApp, apiKey: string): OpenAI {
  return new OpenAI({ apiKey, baseURL: app.baseURL, maxRetries: 0 });
}

async function modelIds(app: ForwardApp, apiKey: string): Promise<string[]> {
  return (await client(app, apiKey).models.list()).data.map((model) => model.id);
}

function getModels(app: ForwardApp, key: string): Promise<Response> {
  return fetch(`${app.baseURL}/models`, { headers: { authorization: `Bearer ${key}` } });
}

const hi = [{ role: "user" as const, content: "hi" }];

describe("forward mode: the models a gateway key sees", () => {
  it("answers GET /v1/models with the gateway's list for each key, sorted, without duplicates", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw);
    expect(await modelIds(app, ALICE)).toEqual(["dall-e-3", "gpt-4o-mini", "gpt-image-1"]);
    expect(await modelIds(app, BOB)).toEqual(["gpt-4o"]);
    const page = await client(app, ALICE).models.list();
    for (const model of page.data) {
      expect(model).toEqual({
        id: model.id,
        object: "model",
        created: 1_700_000_000,
        owned_by: "gw",
      });
    }
    // Cached: the second listing of each key did not ask again.
    expect(gw.modelCalls(ALICE)).toBe(1);
    expect(gw.modelCalls(BOB)).toBe(1);
  });

  it("answers GET /v1/models/{id} for the key's own models, 404 alike for another's and an unknown one", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw);
    expect(await client(app, ALICE).models.retrieve("gpt-image-1")).toMatchObject({
      id: "gpt-image-1",
      object: "model",
    });
    const others = await sdkError(client(app, BOB).models.retrieve("gpt-image-1"));
    const unknown = await sdkError(client(app, BOB).models.retrieve("no-such-model"));
    for (const error of [others, unknown]) {
      expect(error.status).toBe(404);
      expect(error.code).toBe("model_not_found");
    }
    await expectError(
      await fetch(`${app.baseURL}/models/gpt-image-1`, {
        headers: { authorization: `Bearer ${BOB}` },
      }),
      404,
      "model_not_found",
    );
  });

  it("narrows the gateway's list by the forward channel's own models", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw, { models: ["gpt-image-*", "gpt-4o"] });
    expect(await modelIds(app, ALICE)).toEqual(["gpt-image-1"]);
    expect(await modelIds(app, BOB)).toEqual(["gpt-4o"]);
  });

  it("sends a forward key's chat to the gateway with that key, and refuses a model outside its list", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw, { apiKey: UPSTREAM_KEY });
    const seen = gw.upstream.nextRequest("chat");
    const completion = await client(app, ALICE).chat.completions.create({
      model: "gpt-4o-mini",
      messages: hi,
    });
    expect(completion.choices[0]?.message.content).toBe("Hello from fake-gateway!");
    expect((await seen).headers.authorization).toBe(`Bearer ${ALICE}`);

    const refused = await sdkError(
      client(app, BOB).chat.completions.create({ model: "gpt-4o-mini", messages: hi }),
    );
    expect(refused.status).toBe(404);
    expect(refused.code).toBe("model_not_found");
    const chats = gw.upstream.requests.filter((r) => r.path === "/v1/chat/completions");
    expect(chats).toHaveLength(1);
  });
});

describe("forward mode beside configured keys and JWTs", () => {
  async function signJwt(claims: Record<string, unknown>): Promise<string> {
    return new SignJWT(claims)
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("user-7")
      .setExpirationTime("5m")
      .sign(new TextEncoder().encode(JWT_SECRET));
  }

  it("keeps configured keys and JWTs on their groups, with the channel's key, never asking the gateway about them", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw, { apiKey: UPSTREAM_KEY });
    const jwt = await signJwt({ group: "default" });
    for (const key of [TEST_KEYS.default, jwt]) {
      expect(await modelIds(app, key)).toEqual(["gpt-4o-mini", "gpt-image-1"]);
      const seen = gw.upstream.nextRequest("chat");
      await client(app, key).chat.completions.create({ model: "gpt-4o-mini", messages: hi });
      expect((await seen).headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    }
    const sent = JSON.stringify(gw.upstream.requests.map((r) => r.headers));
    expect(sent).not.toContain(TEST_KEYS.default);
    expect(sent).not.toContain(jwt);
  });

  it("refuses a bad JWT without sending it to the gateway", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw, { apiKey: UPSTREAM_KEY });
    const forged = await new SignJWT({ group: "default" })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("user-7")
      .setExpirationTime("5m")
      .sign(new TextEncoder().encode("another-secret-0123456789abcdef"));
    await expectError(await getModels(app, forged), 401, "invalid_api_key");
    expect(JSON.stringify(gw.upstream.requests.map((r) => r.headers))).not.toContain(forged);
  });

  it("routes configured keys only to channels with a key of their own", async () => {
    const gw = await gateway();
    // The gateway channel has no apiKey: only forward keys can use it.
    const app = await forwardApp(gw);
    expect(await modelIds(app, TEST_KEYS.default)).toEqual([]);
    const refused = await sdkError(
      client(app, TEST_KEYS.default).chat.completions.create({
        model: "gpt-4o-mini",
        messages: hi,
      }),
    );
    expect(refused.code).toBe("model_not_found");
    expect(gw.upstream.requests).toHaveLength(0);
  });
});

describe("forward mode: refused keys", () => {
  it("answers the gateway's 401 with 401 invalid_api_key, asking it once per refusal period", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw, { forward: { refusalCacheSec: 300 } });
    const error = await sdkError(client(app, UNKNOWN).models.list());
    expect(error.status).toBe(401);
    expect(error.code).toBe("invalid_api_key");
    expect(JSON.stringify(error.error)).not.toContain(UNKNOWN);
    for (let i = 0; i < 5; i += 1) {
      await expectError(await getModels(app, UNKNOWN), 401, "invalid_api_key");
    }
    const flood = await Promise.all(Array.from({ length: 20 }, () => getModels(app, UNKNOWN)));
    expect(flood.map((response) => response.status)).toEqual(Array(20).fill(401));
    const chat = await sdkError(
      client(app, UNKNOWN).chat.completions.create({ model: "gpt-4o-mini", messages: hi }),
    );
    expect(chat.status).toBe(401);
    expect(gw.modelCalls(UNKNOWN)).toBe(1);
    expect(gw.upstream.requests.filter((r) => r.path !== "/v1/models")).toHaveLength(0);
  });

  it("refuses a key the gateway could not take as a bearer without asking it", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw);
    await expectError(await getModels(app, "x".repeat(2000)), 401, "invalid_api_key");
    expect(gw.modelCalls()).toBe(0);
  });
});

describe("forward mode: one gateway call per key", () => {
  it("shares one gateway call among many concurrent requests with one new key", async () => {
    const gw = await gateway();
    gw.upstream.behave("models", {
      kind: "custom",
      respond: async (_req, res) => {
        // Slow enough that the requests below overlap the first check.
        await new Promise((resolve) => setTimeout(resolve, 300));
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "list", data: [{ id: "gpt-4o-mini" }] }));
      },
    });
    const app = await forwardApp(gw);
    const responses = await Promise.all(Array.from({ length: 25 }, () => getModels(app, ALICE)));
    expect(responses.map((response) => response.status)).toEqual(Array(25).fill(200));
    expect(gw.modelCalls(ALICE)).toBe(1);
    for (const response of responses) {
      expect(((await response.json()) as { data: Array<{ id: string }> }).data[0]?.id).toBe(
        "gpt-4o-mini",
      );
    }
  });
});

describe("forward mode: the gateway down", () => {
  const failures: Array<[string, (gw: FakeGateway) => void]> = [
    ["answers 500", (gw) => gw.upstream.behave("models", { kind: "status", status: 500 })],
    ["answers 200 with HTML", (gw) => gw.upstream.behave("models", { kind: "garbage" })],
    ["drops the connection", (gw) => gw.upstream.behave("models", { kind: "reset" })],
    [
      "answers 404 (no such route)",
      (gw) => gw.upstream.behave("models", { kind: "status", status: 404 }),
    ],
    [
      "answers 200 that is not a model list",
      (gw) =>
        gw.upstream.behave("models", {
          kind: "status",
          status: 200,
          body: { success: true, message: "" },
        }),
    ],
  ];

  for (const [name, fail] of failures) {
    it(`is 502 upstream_unavailable, not 401, when the gateway ${name}; nothing is cached`, async () => {
      const gw = await gateway();
      const app = await forwardApp(gw);
      fail(gw);
      await expectError(await getModels(app, ALICE), 502, "upstream_unavailable");
      const sdk = await sdkError(
        client(app, ALICE).chat.completions.create({ model: "gpt-4o-mini", messages: hi }),
      );
      expect(sdk.status).toBe(502);
      expect(gw.modelCalls(ALICE)).toBe(2);
      gw.up();
      expect((await getModels(app, ALICE)).status).toBe(200);
    });
  }

  it("takes model lists the gateway holds open after their JSON at once: key checks, listings, its check", async () => {
    const gw = await gateway();
    gw.hold();
    // Held open, a list was read until the key check's timeout and the key refused 502.
    const app = await forwardApp(gw, { apiKey: UPSTREAM_KEY, forward: { timeoutSec: 60 } });
    expect(await modelIds(app, ALICE)).toEqual(["dall-e-3", "gpt-4o-mini", "gpt-image-1"]);
    // The configured key's list is the channel's own, listed with its key.
    expect(await modelIds(app, TEST_KEYS.default)).toEqual(["gpt-4o-mini", "gpt-image-1"]);
    const ready = () => fetch(`${app.server.url}/readyz`).then((r) => r.text());
    await vi.waitFor(async () => expect(await ready()).toContain('"newapi":"ok"'), 10_000);
  });

  it("is 502 upstream_unavailable when the gateway does not answer within timeoutSec", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw, { forward: { timeoutSec: 1 } });
    gw.upstream.behave("models", { kind: "hang" });
    await expectError(await getModels(app, ALICE), 502, "upstream_unavailable");
  });

  it("is 502 upstream_unavailable when nothing listens at the gateway's address", async () => {
    const gw = await gateway();
    const closed = await startFakeGateway({});
    const deadUrl = closed.baseUrl;
    await closed.close();
    const app = await forwardApp(gw, { baseUrl: deadUrl });
    await expectError(await getModels(app, ALICE), 502, "upstream_unavailable");
  });

  it("passes the gateway's 429 on as 429 upstream_rate_limited, with its Retry-After", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw);
    gw.upstream.behave("models", {
      kind: "custom",
      respond: (_req, res) => {
        res.writeHead(429, { "retry-after": "7", "content-type": "text/plain" });
        res.end("slow down");
      },
    });
    const response = await getModels(app, ALICE);
    expect(response.headers.get("retry-after")).toBe("7");
    await expectError(response, 429, "upstream_rate_limited");
  });
});

describe("forward mode: no key in logs or metrics", () => {
  it("never writes a forward key to a log line, at debug level, whatever happens", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
        done();
      },
    });
    const gw = await gateway();
    const app = await forwardApp(gw, { logger: createLogger("debug", sink) });

    expect(await modelIds(app, ALICE)).toHaveLength(3);
    await client(app, ALICE).chat.completions.create({ model: "gpt-4o-mini", messages: hi });
    await expectError(await getModels(app, UNKNOWN), 401, "invalid_api_key");
    gw.upstream.behave("models", { kind: "reset" });
    await expectError(await getModels(app, BOB), 502, "upstream_unavailable");
    gw.upstream.behave("models", { kind: "status", status: 500 });
    await expectError(await getModels(app, BOB), 502, "upstream_unavailable");
    gw.upstream.behave("chat", { kind: "status", status: 400 });
    await sdkError(
      client(app, ALICE).chat.completions.create({ model: "gpt-4o-mini", messages: hi }),
    );

    const log = lines.join("\n");
    // The test sees what it should: the checks were logged, by owner hash only.
    expect(log).toContain("forward key accepted by the gateway");
    expect(log).toContain("forward key refused by the gateway");
    expect(log).toContain("could not check a forward key with the gateway");
    expect(log).toMatch(/"subject":"fwd:[0-9a-f]{32}"/);
    for (const key of [ALICE, BOB, UNKNOWN]) expect(log).not.toContain(key);
  });

  it("puts neither a forward key nor its hash into /metrics", async () => {
    const gw = await gateway();
    const app = await forwardApp(gw, { apiKey: UPSTREAM_KEY });
    await client(app, ALICE).chat.completions.create({ model: "gpt-4o-mini", messages: hi });
    await getModels(app, UNKNOWN);
    const metrics = await (await fetch(`${app.server.url}/metrics`)).text();
    expect(metrics).toContain("image_task_sidecar_upstream_requests_total");
    for (const key of [ALICE, UNKNOWN]) expect(metrics).not.toContain(key);
    expect(metrics).not.toMatch(/fwd:|[0-9a-f]{32}/);
  });
});
