import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { inspectPng } from "../demo/inspect-png.js";
import { startFakeUpstream, type FakeUpstream } from "./fake-upstream.js";

let upstream: FakeUpstream;
let client: OpenAI;

beforeAll(async () => {
  upstream = await startFakeUpstream({ name: "alpha", models: ["m-1", "gpt-image-1"] });
  client = new OpenAI({ baseURL: upstream.baseUrl, apiKey: "sk-upstream", maxRetries: 0 });
});
afterEach(() => upstream.reset());
afterAll(() => upstream.close());

function post(path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${upstream.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
}

describe("fake upstream", () => {
  it("answers chat, records the request and resolves nextRequest", async () => {
    const next = upstream.nextRequest("chat");
    const completion = await client.chat.completions.create({
      model: "m-1",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(completion.model).toBe("m-1");
    expect(completion.choices[0]?.message.content).toBe("Hello from alpha!");
    const recorded = await next;
    expect(recorded).toMatchObject({ method: "POST", path: "/v1/chat/completions" });
    expect(recorded.headers.authorization).toBe("Bearer sk-upstream");
    expect(recorded.body).toMatchObject({
      model: "m-1",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(upstream.requests).toEqual([recorded]);
  });

  it("holds streams after the first chunks until release()", async () => {
    upstream.holdStreams();
    const stream = await client.chat.completions.create({
      model: "m-1",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.value?.object).toBe("chat.completion.chunk");
    const second = await iterator.next();
    expect(second.value?.choices[0]?.delta.content).toBe("Hello ");

    let third: unknown;
    void iterator.next().then((result) => (third = result));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(third).toBeUndefined(); // still held

    upstream.release();
    const rest: string[] = [];
    const afterRelease = (await vi.waitFor(() => {
      expect(third).toBeDefined();
      return third;
    })) as IteratorResult<OpenAI.ChatCompletionChunk>;
    rest.push(afterRelease.value?.choices[0]?.delta.content ?? "");
    let finish: string | null | undefined;
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) {
      rest.push(r.value.choices[0]?.delta.content ?? "");
      finish = r.value.choices[0]?.finish_reason;
    }
    expect(rest.join("")).toBe("from alpha!");
    expect(finish).toBe("stop");
  });

  it("counts concurrent image generations and returns valid PNGs", async () => {
    upstream.behave("images", { kind: "ok", delayMs: 100 });
    const results = await Promise.all(
      [1, 2, 3].map((n) => client.images.generate({ model: "gpt-image-1", prompt: "p", n })),
    );
    expect(results.map((r) => r.data?.length)).toEqual([1, 2, 3]);
    const png = inspectPng(Buffer.from(results[0]?.data?.[0]?.b64_json ?? "", "base64"));
    expect([png.width, png.height]).toEqual([4, 4]);
    expect(upstream.maxInFlight).toBe(3);
    expect(upstream.inFlight).toBe(0);
    expect(upstream.aborted).toBe(0);
  });

  it("counts a client that gives up on a hanging request as aborted", async () => {
    upstream.behave("images", { kind: "hang" });
    const controller = new AbortController();
    const arrived = upstream.nextRequest("images");
    const pending = post("/images/generations", { prompt: "p" }, controller.signal).catch(
      (e: unknown) => e,
    );
    await arrived;
    expect(upstream.inFlight).toBe(1);
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    await vi.waitFor(() => expect(upstream.aborted).toBe(1));
    expect(upstream.inFlight).toBe(0);
    expect(upstream.maxInFlight).toBe(1);
  });

  it("answers scripted statuses, garbage, resets and unknown routes", async () => {
    upstream.behave("chat", { kind: "status", status: 503 });
    const unavailable = await post("/chat/completions", { model: "m-1" });
    expect(unavailable.status).toBe(503);
    expect(await unavailable.json()).toEqual({
      error: {
        message: expect.any(String),
        type: "server_error",
        param: null,
        code: expect.any(String),
      },
    });

    upstream.behave("chat", { kind: "status", status: 429, body: { error: { message: "slow" } } });
    const limited = await post("/chat/completions", {});
    expect([limited.status, await limited.json()]).toEqual([429, { error: { message: "slow" } }]);

    upstream.behave("models", { kind: "garbage" });
    const garbage = await fetch(`${upstream.baseUrl}/models`);
    expect(garbage.headers.get("content-type")).toBe("application/json");
    await expect(garbage.json()).rejects.toThrow(SyntaxError);

    upstream.behave("images", { kind: "reset" });
    await expect(post("/images/generations", {})).rejects.toThrow();

    const unknown = await post("/nope", {});
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: "not_found" } });
    // A reset by the fake itself is not a client abort.
    expect(upstream.aborted).toBe(0);
  });

  it("lists its models and goes back to ok on reset()", async () => {
    upstream.behave("models", { kind: "status", status: 500 });
    upstream.reset();
    expect(upstream.requests).toHaveLength(0);
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(["m-1", "gpt-image-1"]);
    expect(upstream.requests.map((r) => [r.method, r.path, r.body])).toEqual([
      ["GET", "/v1/models", undefined],
    ]);
  });

  it("close() ends hanging requests", async () => {
    const other = await startFakeUpstream();
    other.behave("chat", { kind: "hang" });
    const arrived = other.nextRequest("chat");
    const pending = fetch(`${other.baseUrl}/chat/completions`, { method: "POST", body: "x" }).catch(
      (e: unknown) => e,
    );
    expect((await arrived).body).toBe("x");
    await other.close();
    expect(await pending).toBeInstanceOf(Error);
  });
});
