import OpenAI, { toFile } from "openai";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/config-schema.js";
import { parseConfig } from "../../src/config/load-config.js";
import { startServer } from "../../src/server.js";
import { sdkError } from "../http/error-envelope.js";
import { startFakeGateway, type FakeGateway } from "../support/fake-gateway.js";
import { UPSTREAM_KEY } from "../support/start-test-app.js";

/** Keys the fake new-api knows: Alice may use chat and images, Bob one chat model only. */
const ALICE = "sk-newapi-alice-proxy-0123456789abcdef";
const BOB = "sk-newapi-bob-proxy-0123456789abcdef";
const GATEWAY_KEYS = {
  [ALICE]: ["gpt-4o-mini", "gpt-image-1", "text-embedding-3-small"],
  [BOB]: ["gpt-4o"],
};

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

/** The service in front of a fake new-api, in forward mode, the gateway channel with a key of its own. */
async function forwardApp(): Promise<{ gw: FakeGateway; client: (key: string) => OpenAI }> {
  const gw = await startFakeGateway(GATEWAY_KEYS);
  cleanups.push(() => gw.close());
  const input: ConfigInput = {
    server: { port: 0, host: "127.0.0.1", shutdownGraceSec: 1 },
    store: { url: "memory://" },
    auth: { forward: { channel: "newapi", secret: "forward-proxy-test-secret-0123456789abcdef" } },
    groups: {},
    channels: [{ name: "newapi", baseUrl: gw.baseUrl, apiKey: UPSTREAM_KEY, models: ["*"] }],
    logging: { level: "silent" },
  };
  const server = await startServer({
    config: parseConfig(input),
    logger: pino({ level: "silent" }),
    defaultMetrics: false,
  });
  cleanups.push(() => server.close(500));
  return {
    gw,
    client: (key) => new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 }),
  };
}

/** The bearers the gateway saw on `path`, in order. */
function bearers(gw: FakeGateway, path: string): Array<string | undefined> {
  return gw.upstream.requests
    .filter((request) => request.path.split("?")[0] === path)
    .map((request) => request.headers.authorization);
}

const png = () => Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47]), Buffer.alloc(1020, 7)]);

describe("forward mode on the passthrough routes", () => {
  it("sends every route to the gateway with the client's own key, never the channel's", async () => {
    const { gw, client } = await forwardApp();
    const alice = client(ALICE);

    const created = await alice.responses.create({ model: "gpt-4o-mini", input: "hi" });
    expect(created.output_text).toBe("Hello from fake-gateway!");
    expect((await alice.responses.retrieve(created.id)).id).toBe(created.id);
    const stream = await alice.responses.create({
      model: "gpt-4o-mini",
      input: "hi",
      stream: true,
    });
    for await (const _event of stream) void _event;
    await alice.embeddings.create({ model: "text-embedding-3-small", input: "hi" });
    await alice.images.generate({ model: "gpt-image-1", prompt: "a lighthouse" });
    await alice.images.edit({
      model: "gpt-image-1",
      prompt: "add a boat",
      image: await toFile(png(), "in.png", { type: "image/png" }),
    });

    expect(bearers(gw, "/v1/responses")).toEqual([`Bearer ${ALICE}`, `Bearer ${ALICE}`]);
    expect(bearers(gw, `/v1/responses/${created.id}`)).toEqual([`Bearer ${ALICE}`]);
    expect(bearers(gw, "/v1/embeddings")).toEqual([`Bearer ${ALICE}`]);
    expect(bearers(gw, "/v1/images/generations")).toEqual([`Bearer ${ALICE}`]);
    expect(bearers(gw, "/v1/images/edits")).toEqual([`Bearer ${ALICE}`]);
    const everything = JSON.stringify(gw.upstream.requests.map((request) => request.headers));
    expect(everything).not.toContain(UPSTREAM_KEY);
  });

  it("refuses a model outside the key's gateway list on Responses, sync images and forms, before anything is sent", async () => {
    const { gw, client } = await forwardApp();
    const bob = client(BOB);
    const image = await toFile(png(), "in.png", { type: "image/png" });
    const refusals = [
      () => bob.responses.create({ model: "gpt-4o-mini", input: "hi" }),
      () => bob.images.generate({ model: "gpt-image-1", prompt: "a lighthouse" }),
      () => bob.images.edit({ model: "gpt-image-1", prompt: "add a boat", image }),
      () => bob.embeddings.create({ model: "text-embedding-3-small", input: "hi" }),
    ];
    for (const refused of refusals) {
      const error = await sdkError(refused());
      expect(error.status).toBe(404);
      expect(error.code).toBe("model_not_found");
    }
    const sent = gw.upstream.requests.filter((request) => request.path !== "/v1/models");
    expect(sent).toEqual([]);
  });

  it("keeps one key's stored responses from another key of the same gateway", async () => {
    const { client } = await forwardApp();
    const created = await client(ALICE).responses.create({ model: "gpt-4o-mini", input: "hi" });
    const error = await sdkError(client(BOB).responses.retrieve(created.id));
    expect(error.status).toBe(404);
  });
});
