import { describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, TEST_KEYS, UPSTREAM_KEY } from "../support/start-test-app.js";
import { apiError, responseCalls, retrieveUntil, sdk } from "./response-helpers.js";
import { scriptChannel } from "./scripted-channel.js";

describe("responses the service did not make, and channels that run background mode", () => {
  it("passes a channel's own response ids through to it, as before", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const client = sdk(app);
    const foreground = await client.responses.create({ model: "gpt-4o-mini", input: "plain" });
    expect(foreground.id).toMatch(/^resp_fake/);
    const read = await client.responses.retrieve(foreground.id);
    expect(read.id).toBe(foreground.id);
    expect(responseCalls(app).map((call) => `${call.method} ${call.path}`)).toEqual([
      "POST /v1/responses",
      `GET /v1/responses/${foreground.id}`,
    ]);
    // An id nobody made is the same 404, without a call to any channel.
    const unknown = await apiError(client.responses.retrieve("resp_0123456789abcdef0123456789"));
    expect(unknown).toMatchObject({ status: 404, error: { code: "response_not_found" } });
    expect(responseCalls(app)).toHaveLength(2);
  });

  it("refuses a `background` or `previous_response_id` of another type, as OpenAI does, before any channel call", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const client = sdk(app);
    for (const [param, value] of [
      ["background", "true"],
      ["background", 1],
      ["previous_response_id", 42],
      ["previous_response_id", { id: "resp_x" }],
    ] as const) {
      const refused = await apiError(
        client.post("/responses", { body: { model: "gpt-4o-mini", input: "x", [param]: value } }),
      );
      expect(refused, `${param}: ${JSON.stringify(value)}`).toMatchObject({
        status: 400,
        error: { code: "invalid_value", param, type: "invalid_request_error" },
      });
    }
    // A background response is streamed by the service: its `stream` is checked too.
    const streamed = await apiError(
      client.post("/responses", {
        body: { model: "gpt-4o-mini", input: "x", background: true, stream: "true" },
      }),
    );
    expect(streamed).toMatchObject({
      status: 400,
      error: { code: "invalid_value", param: "stream" },
    });
    expect(responseCalls(app)).toHaveLength(0);
    // null is OpenAI's "not set": passed on as any other field.
    const plain = await client.post<{ id: string }>("/responses", {
      body: { model: "gpt-4o-mini", input: "x", background: null, previous_response_id: null },
    });
    expect(plain.id).toMatch(/^resp_fake/);
    expect(responseCalls(app)).toHaveLength(1);
  });

  it("sends background: true on to a channel set to `responses.background: native`", async () => {
    const upstream = await startFakeUpstream();
    onTestFinished(() => upstream.close());
    const native = await startTestApp({
      upstream,
      config: {
        channels: [
          {
            name: "openai",
            baseUrl: upstream.baseUrl,
            apiKey: UPSTREAM_KEY,
            models: ["gpt-4o-mini"],
            responses: { background: "native" },
          },
        ],
      },
    });
    onTestFinished(() => native.close());
    const client = sdk(native);
    const created = await client.responses.create({
      model: "gpt-4o-mini",
      input: "the channel's own background mode",
      background: true,
    });
    // The channel's own response and id, passed through.
    expect(created.id).toMatch(/^resp_fake/);
    expect(created.status).toBe("queued");
    const [sent] = responseCalls(native);
    expect(sent?.body).toMatchObject({ background: true });
    expect(sent?.body).not.toHaveProperty("stream");
    const read = await client.responses.retrieve(created.id);
    expect(read.id).toBe(created.id);
    expect(responseCalls(native).at(-1)?.path).toBe(`/v1/responses/${created.id}`);
  });

  it("sends a previous_response_id naming a background response as the channel's own id for it", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const channel = scriptChannel(app.upstream);
    const client = sdk(app);
    const first = await client.responses.create({
      model: "gpt-4o-mini",
      input: "first",
      background: true,
    });
    await retrieveUntil(client, first.id, ["completed"]);
    const upstreamId = channel.ids[0];
    expect(upstreamId).toMatch(/^resp_[0-9a-f]{48}$/);

    await client.responses.create({
      model: "gpt-4o-mini",
      input: "second",
      previous_response_id: first.id,
    });
    const second = await client.responses.create({
      model: "gpt-4o-mini",
      input: "third",
      previous_response_id: first.id,
      background: true,
    });
    const third = await retrieveUntil(client, second.id, ["completed", "failed"]);
    expect(third.status).toBe("completed");
    expect(third.previous_response_id).toBe(first.id);
    const sent = responseCalls(app).map(
      (call) => (call.body as { previous_response_id?: string }).previous_response_id,
    );
    expect(sent).toEqual([undefined, upstreamId, upstreamId]);

    // Another key's background response is no one's previous response.
    const refused = await apiError(
      sdk(app, TEST_KEYS.other).responses.create({
        model: "gpt-4o-mini",
        input: "not mine",
        previous_response_id: first.id,
      }),
    );
    expect(refused).toMatchObject({
      status: 404,
      error: { code: "response_not_found", param: "previous_response_id" },
    });
  });
});
