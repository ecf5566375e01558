import { inspect } from "node:util";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createChannel } from "../../src/channels/channel.js";
import { createChannelClient } from "../../src/channels/channel-client.js";
import {
  createForwardAuthenticator,
  type ForwardAuthenticate,
} from "../../src/auth/forward-authenticator.js";
import { createKeyHasher } from "../../src/auth/forward-secret.js";
import { ServiceError } from "../../src/errors/service-error.js";
import { errorResponse } from "../../src/http/send-error.js";
import { createMetrics } from "../../src/metrics/create-metrics.js";
import { startFakeGateway, type FakeGateway } from "../support/fake-gateway.js";

const SECRET = "unit-forward-secret-0123456789abcdef-0001";
const KEYS = {
  "sk-a-0001": ["gpt-image-1", "gpt-4o-mini"],
  "sk-b-0002": ["gpt-4o-mini", "gpt-image-1"],
  "sk-c-0003": ["gpt-4o"],
};

let gw: FakeGateway;
afterEach(() => gw?.close());

interface Setup {
  authenticate: ForwardAuthenticate;
  advance(ms: number): void;
}

function setup(
  options: Partial<{
    cacheSec: number;
    refusalCacheSec: number;
    maxCachedKeys: number;
    secret: string;
    timeoutSec: number;
  }> = {},
): Setup {
  let clock = 1_000_000;
  const channel = createChannel({
    name: "newapi",
    type: "openai",
    baseUrl: gw.baseUrl,
    models: ["*"],
    priority: 0,
    weight: 1,
    timeoutSec: 120,
    imageTimeoutSec: 600,
    modelsCacheSec: 60,
    imageUrlOrigins: [],
    maxImageBytes: 1024,
    imageDelayMs: 0,
  });
  const authenticate = createForwardAuthenticator({
    channel,
    options: {
      cacheSec: options.cacheSec ?? 60,
      refusalCacheSec: options.refusalCacheSec ?? 5,
      timeoutSec: options.timeoutSec ?? 10,
      maxCachedKeys: options.maxCachedKeys ?? 100,
      maxChecksInFlight: 16,
      maxChecksPerSec: 1000,
      maxChecksInFlightPerClient: 16,
      maxChecksPerClientPerSec: 1000,
    },
    hashKey: createKeyHasher(async () => options.secret ?? SECRET),
    logger: pino({ level: "silent" }),
    client: createChannelClient({
      metrics: createMetrics({ defaultMetrics: false }),
      logger: pino({ level: "silent" }),
    }),
    now: () => clock,
  });
  return { authenticate, advance: (ms) => (clock += ms) };
}

describe("createForwardAuthenticator", () => {
  it("reuses an accepted key for cacheSec, then asks the gateway again", async () => {
    gw = await startFakeGateway(KEYS);
    const { authenticate, advance } = setup({ cacheSec: 60 });
    const first = await authenticate("sk-a-0001");
    expect(first?.upstream?.models.list.map((model) => model.id)).toEqual([
      "gpt-4o-mini",
      "gpt-image-1",
    ]);
    advance(59_000);
    await authenticate("sk-a-0001");
    expect(gw.modelCalls("sk-a-0001")).toBe(1);
    advance(1_000);
    await authenticate("sk-a-0001");
    expect(gw.modelCalls("sk-a-0001")).toBe(2);
  });

  it("refuses a refused key for refusalCacheSec without asking, then asks again", async () => {
    gw = await startFakeGateway(KEYS);
    const { authenticate, advance } = setup({ refusalCacheSec: 5 });
    expect(await authenticate("sk-bad")).toBeUndefined();
    advance(4_999);
    expect(await authenticate("sk-bad")).toBeUndefined();
    expect(gw.modelCalls("sk-bad")).toBe(1);
    advance(1);
    expect(await authenticate("sk-bad")).toBeUndefined();
    expect(gw.modelCalls("sk-bad")).toBe(2);
  });

  it("takes a 403 as a refusal too", async () => {
    gw = await startFakeGateway(KEYS);
    gw.upstream.behave("models", { kind: "status", status: 403 });
    const { authenticate } = setup();
    expect(await authenticate("sk-a-0001")).toBeUndefined();
    expect(await authenticate("sk-a-0001")).toBeUndefined();
    expect(gw.modelCalls()).toBe(1);
  });

  it("makes one gateway call for concurrent checks of one key", async () => {
    gw = await startFakeGateway(KEYS);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    gw.upstream.behave("models", {
      kind: "custom",
      respond: async (_req, res) => {
        await released;
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ data: [{ id: "gpt-4o" }] }));
      },
    });
    const { authenticate } = setup();
    const asked = gw.upstream.nextRequest("models");
    const checks = Array.from({ length: 10 }, () => authenticate("sk-c-0003"));
    await asked;
    release();
    const principals = await Promise.all(checks);
    expect(principals.every((principal) => principal?.upstream?.models.ids.has("gpt-4o"))).toBe(
      true,
    );
    expect(gw.modelCalls()).toBe(1);
  });

  it("does not cache a gateway failure: the next request asks again", async () => {
    gw = await startFakeGateway(KEYS);
    gw.upstream.behave("models", { kind: "status", status: 503 });
    const { authenticate } = setup();
    const error = await authenticate("sk-a-0001").catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).code).toBe("upstream_unavailable");
    expect(errorResponse(error).status).toBe(502);
    gw.up();
    expect(await authenticate("sk-a-0001")).toBeDefined();
    expect(gw.modelCalls()).toBe(2);
  });

  it("bounds the cache: past maxCachedKeys the least recently used key is asked again", async () => {
    gw = await startFakeGateway(KEYS);
    const { authenticate } = setup({ maxCachedKeys: 2 });
    await authenticate("sk-a-0001");
    await authenticate("sk-b-0002");
    await authenticate("sk-a-0001"); // a is now the most recent
    await authenticate("sk-c-0003"); // b goes
    expect(gw.modelCalls()).toBe(3);
    await authenticate("sk-a-0001");
    expect(gw.modelCalls()).toBe(3);
    await authenticate("sk-b-0002");
    expect(gw.modelCalls("sk-b-0002")).toBe(2);
  });

  it("keeps accepted keys while a flood of bad keys churns the refusal cache", async () => {
    gw = await startFakeGateway(KEYS);
    const { authenticate } = setup({ maxCachedKeys: 2 });
    await authenticate("sk-a-0001");
    for (let i = 0; i < 10; i += 1) await authenticate(`sk-random-${i}`);
    await authenticate("sk-a-0001");
    expect(gw.modelCalls("sk-a-0001")).toBe(1);
  });

  it("owns a key by a keyed hash: stable for one secret, different for another, never the key", async () => {
    gw = await startFakeGateway(KEYS);
    const one = await setup().authenticate("sk-a-0001");
    const again = await setup().authenticate("sk-a-0001");
    const otherKey = await setup().authenticate("sk-b-0002");
    const otherSecret = await setup({
      secret: "another-forward-secret-0123456789abcdef",
    }).authenticate("sk-a-0001");
    expect(one?.subject).toMatch(/^fwd:[0-9a-f]{32}$/);
    expect(again?.subject).toBe(one?.subject);
    expect(otherKey?.subject).not.toBe(one?.subject);
    expect(otherSecret?.subject).not.toBe(one?.subject);
    expect(one?.group).toBe("forward");
    expect(one?.upstream?.channel).toBe("newapi");
  });

  it("keeps the key on the principal only behind reveal(): not in JSON, not in inspect", async () => {
    gw = await startFakeGateway(KEYS);
    const principal = await setup().authenticate("sk-a-0001");
    expect(principal?.upstream?.credential.reveal()).toBe("sk-a-0001");
    expect(JSON.stringify(principal)).not.toContain("sk-a-0001");
    expect(inspect(principal, { depth: 10 })).not.toContain("sk-a-0001");
    expect(`${principal?.upstream?.credential}`).toBe("[redacted]");
  });

  it("refuses a bearer that is not printable ASCII, or is huge, without asking", async () => {
    gw = await startFakeGateway(KEYS);
    const { authenticate } = setup();
    for (const key of ["sk-ключ", "sk-\u0000x", "k".repeat(1025)]) {
      expect(await authenticate(key)).toBeUndefined();
    }
    expect(gw.modelCalls()).toBe(0);
  });

  it("does not follow a redirect with the key", async () => {
    gw = await startFakeGateway(KEYS);
    gw.upstream.behave("models", {
      kind: "custom",
      respond: (_req, res) => {
        res.writeHead(302, { location: `${gw.baseUrl}/elsewhere` });
        res.end();
      },
    });
    const { authenticate } = setup();
    const error = await authenticate("sk-a-0001").catch((err: unknown) => err);
    expect((error as ServiceError).code).toBe("upstream_unavailable");
    expect(gw.upstream.requests.map((request) => request.path)).toEqual(["/v1/models"]);
  });
});
