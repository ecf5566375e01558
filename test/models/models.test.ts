import OpenAI, { type APIError } from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { expectError, sdkError } from "../http/error-envelope.js";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, TEST_KEYS, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function app(options: Parameters<typeof startTestApp>[0] = {}): Promise<TestApp> {
  const started = await startTestApp(options);
  cleanups.push(() => started.close());
  return started;
}

async function upstream(options: Parameters<typeof startFakeUpstream>[0] = {}) {
  const started = await startFakeUpstream(options);
  cleanups.push(() => started.close());
  return started;
}

function client(test: TestApp, apiKey: string = test.key): OpenAI {
  return new OpenAI({ apiKey, baseURL: test.baseURL, maxRetries: 0 });
}

async function listIds(openai: OpenAI): Promise<string[]> {
  const ids: string[] = [];
  for await (const model of openai.models.list()) ids.push(model.id);
  return ids;
}

function channel(name: string, fake: FakeUpstream, models: string[], extra = {}) {
  return { name, baseUrl: fake.baseUrl, apiKey: UPSTREAM_KEY, models, ...extra };
}

describe("GET /v1/models", () => {
  it("shows the default group exactly its share of the channel's models", async () => {
    const test = await app();
    const page = await client(test).models.list();
    expect(page.data.map((model) => model.id)).toEqual(["gpt-4o-mini", "gpt-image-1"]);
    for (const model of page.data) {
      expect(model).toEqual({
        id: model.id,
        object: "model",
        created: expect.any(Number),
        owned_by: expect.any(String),
      });
    }
  });

  it("shows the vip group every model, sorted by id", async () => {
    const test = await app();
    expect(await listIds(client(test, test.vipKey))).toEqual([
      "dall-e-3",
      "gpt-4o",
      "gpt-4o-mini",
      "gpt-image-1",
    ]);
  });

  it("shows a group limited to one exact id just that id", async () => {
    const test = await app();
    expect(await listIds(client(test, TEST_KEYS.chat))).toEqual(["gpt-4o-mini"]);
  });

  it("lists a model two channels serve once", async () => {
    const first = await upstream({ name: "first" });
    const second = await upstream({ name: "second" });
    const test = await app({
      upstream: first,
      config: {
        channels: [
          channel("first", first, ["gpt-4o-mini", "gpt-4o"]),
          channel("second", second, ["gpt-4o", "gpt-4o-mini", "dall-e-3"], { priority: 1 }),
        ],
      },
    });
    expect(await listIds(client(test, test.vipKey))).toEqual(["dall-e-3", "gpt-4o", "gpt-4o-mini"]);
    expect(await listIds(client(test))).toEqual(["gpt-4o-mini"]);
  });

  it("resolves a channel's glob from the channel's own /v1/models, with its key", async () => {
    const fake = await upstream({
      name: "globbed",
      models: ["gpt-4o-mini", "gpt-4o", "gpt-image-1", "gpt-5-preview", "dall-e-3", "whisper-1"],
    });
    const test = await app({
      upstream: fake,
      config: { channels: [channel("globbed", fake, ["gpt-*"])] },
    });
    const listing = fake.nextRequest("models");
    expect(await listIds(client(test, test.vipKey))).toEqual([
      "gpt-4o",
      "gpt-4o-mini",
      "gpt-5-preview",
      "gpt-image-1",
    ]);
    const request = await listing;
    expect(request.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(await listIds(client(test))).toEqual(["gpt-4o-mini", "gpt-image-1"]);
    // Cached briefly: the second listing did not ask the channel again.
    expect(fake.requests.filter((r) => r.path === "/v1/models")).toHaveLength(1);

    // The resolved glob also routes: a listed model is served, the channel's others are not.
    const completion = await client(test, test.vipKey).chat.completions.create({
      model: "gpt-5-preview",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(completion.choices[0]?.message.content).toBe("Hello from globbed!");
    const refused = await sdkError(
      client(test, test.vipKey).chat.completions.create({
        model: "whisper-1",
        messages: [{ role: "user", content: "hi" }],
      }),
    );
    expect(refused.status).toBe(404);
    expect(refused.code).toBe("model_not_found");
  });

  it("still lists a glob channel's exact ids when its /v1/models fails", async () => {
    const fake = await upstream({ name: "flaky" });
    fake.behave("models", { kind: "status", status: 500 });
    const test = await app({
      upstream: fake,
      config: { channels: [channel("flaky", fake, ["gpt-4o-mini", "gpt-image-*"])] },
    });
    expect(await listIds(client(test, test.vipKey))).toEqual(["gpt-4o-mini"]);
  });

  it("needs a key", async () => {
    const test = await app();
    await expectError(await fetch(`${test.baseURL}/models`), 401, "missing_api_key");
  });
});

describe("GET /v1/models/{id}", () => {
  it("returns a model the key's group may use", async () => {
    const test = await app();
    const model = await client(test).models.retrieve("gpt-image-1");
    expect(model).toMatchObject({ id: "gpt-image-1", object: "model" });
    expect(await client(test, test.vipKey).models.retrieve("dall-e-3")).toMatchObject({
      id: "dall-e-3",
    });
  });

  it("answers 404 model_not_found alike for a model of another group and an unknown one", async () => {
    const test = await app();
    const hidden = await sdkError(client(test).models.retrieve("gpt-4o"));
    const unknown = await sdkError(client(test).models.retrieve("no-such-model"));
    for (const error of [hidden, unknown]) {
      expect(error.status).toBe(404);
      expect(error.code).toBe("model_not_found");
    }
    const message = (error: APIError, id: string) =>
      (error.error as { message: string }).message.replace(id, "<id>");
    expect(message(hidden, "gpt-4o")).toBe(message(unknown, "no-such-model"));

    const raw = await fetch(`${test.baseURL}/models/gpt-4o`, {
      headers: { authorization: `Bearer ${test.key}` },
    });
    await expectError(raw, 404, "model_not_found");
  });
});
