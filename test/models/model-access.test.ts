import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { channelsForOwnKeys } from "../../src/auth/create-forward-mode.js";
import { parseModelList } from "../../src/channels/model-list.js";
import type { Principal } from "../../src/auth/principal.js";
import { UpstreamCredential } from "../../src/auth/upstream-credential.js";
import { createChannel, type Channel } from "../../src/channels/channel.js";
import { createChannelClient } from "../../src/channels/channel-client.js";
import { createChannelRegistry } from "../../src/channels/channel-registry.js";
import { parseConfig } from "../../src/config/load-config.js";
import { createMetrics } from "../../src/metrics/create-metrics.js";
import { createModelAccess } from "../../src/models/model-access.js";

const config = parseConfig({
  groups: { default: { models: ["gpt-4o-mini"] }, vip: { models: ["*"] } },
  channels: [
    { name: "own", baseUrl: "http://127.0.0.1:9001/v1", apiKey: "sk-own", models: ["gpt-4o-mini"] },
    { name: "gateway", baseUrl: "http://127.0.0.1:9002/v1", models: ["gpt-*"] },
  ],
});
const channels = config.channels.map((c) => createChannel({ ...c, baseUrl: c.baseUrl! }));
const [own, gateway] = channels as [Channel, Channel];
const registry = createChannelRegistry({
  channels: channelsForOwnKeys(channels, gateway),
  logger: pino({ level: "silent" }),
  // Never called here: no channel lists its models by glob for these keys.
  client: createChannelClient({
    metrics: createMetrics({ defaultMetrics: false }),
    logger: pino({ level: "silent" }),
  }),
});
const access = createModelAccess({ groups: config.groups, registry, forwardChannel: gateway });

const models = parseModelList(
  Buffer.from(JSON.stringify({ data: [{ id: "gpt-image-1" }, { id: "dall-e-3" }] })),
  "gateway",
)!;
const forwardUser: Principal = {
  subject: "fwd:0123",
  group: "forward",
  keyName: "key_0123",
  upstream: { channel: "gateway", credential: new UpstreamCredential("sk-user"), models },
};
const configured: Principal = { subject: "key:1", group: "default", keyName: "k" };

describe("createModelAccess", () => {
  it("lets a forward key use what its gateway listed, and a configured key its group", () => {
    expect(access.allows(forwardUser, "gpt-image-1")).toBe(true);
    expect(access.allows(forwardUser, "gpt-4o-mini")).toBe(false);
    expect(access.allows(configured, "gpt-4o-mini")).toBe(true);
    expect(access.allows(configured, "gpt-image-1")).toBe(false);
  });

  it("binds a forward key's calls to the gateway with its own key, leaving the channel as it was", () => {
    const [bound, ...rest] = access.candidates(forwardUser, "gpt-image-1");
    expect(rest).toEqual([]);
    expect(bound).toMatchObject({ name: "gateway", baseUrl: gateway.baseUrl, apiKey: "sk-user" });
    expect(gateway.apiKey).toBeUndefined();
    // Listed by the gateway but outside the forward channel's own models: not routed.
    expect(access.candidates(forwardUser, "dall-e-3")).toEqual([]);
    expect(access.candidates(forwardUser, "gpt-4o-mini")).toEqual([]);
  });

  it("routes configured keys to channels with a key of their own only", () => {
    expect(access.candidates(configured, "gpt-4o-mini")).toEqual([own]);
    const vip: Principal = { ...configured, group: "vip" };
    expect(access.candidates(vip, "gpt-image-1")).toEqual([]);
  });

  it("routes a later call (a task run) by credential, without an access check", () => {
    expect(access.route("gpt-image-1", "sk-user")[0]?.apiKey).toBe("sk-user");
    expect(access.route("gpt-4o-mini")).toEqual([own]);
    expect(access.route("dall-e-3", "sk-user")).toEqual([]);
  });

  it("finds the channel that created an object, as the principal calls it", () => {
    expect(access.channelFor(forwardUser, "gateway")?.apiKey).toBe("sk-user");
    expect(access.channelFor(forwardUser, "own")).toBeUndefined();
    expect(access.channelFor(configured, "own")).toBe(own);
    // The key-less gateway is not a channel configured keys can call.
    expect(access.channelFor(configured, "gateway")).toBeUndefined();
  });

  it("lists a forward key's gateway models the forward channel serves", async () => {
    expect((await access.list(forwardUser)).map((model) => model.id)).toEqual(["gpt-image-1"]);
    expect((await access.list(configured)).map((model) => model.id)).toEqual(["gpt-4o-mini"]);
  });
});

describe("channelsForOwnKeys", () => {
  it("keeps a forward channel that has a key of its own", () => {
    const keyed = { ...gateway, apiKey: "sk-gw" };
    expect(channelsForOwnKeys([own, keyed], keyed)).toEqual([own, keyed]);
    expect(channelsForOwnKeys([own, gateway], gateway)).toEqual([own]);
    expect(channelsForOwnKeys([own, gateway], undefined)).toEqual([own, gateway]);
  });
});
