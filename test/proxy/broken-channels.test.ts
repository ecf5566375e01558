import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { ConfigInput } from "../../src/config/config-schema.js";
import { expectError } from "../http/error-envelope.js";
import { startFakeUpstream, type FakeRoute, type FakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

// A channel that answers 200 and then resets, truncates its JSON, sends something that is
// not JSON or stalls must never reach the client as a 200 with a broken body, and the
// request never goes to another channel after it. One whose whole JSON answer is held open
// (or followed by more) reaches the client with that answer.
const MODELS = ["gpt-4o-mini", "gpt-image-1"];
let first: FakeUpstream;
let second: FakeUpstream;
let single: TestApp;
let pair: TestApp;

async function appOn(...upstreams: FakeUpstream[]): Promise<TestApp> {
  return startTestApp({
    upstream: upstreams[0],
    config: {
      channels: upstreams.map((upstream, index) => ({
        name: `channel-${index}`,
        baseUrl: upstream.baseUrl,
        apiKey: UPSTREAM_KEY,
        models: MODELS,
        priority: index,
        timeoutSec: 1,
        imageTimeoutSec: 1,
      })) as ConfigInput["channels"],
    },
  });
}

beforeAll(async () => {
  first = await startFakeUpstream({ name: "first" });
  second = await startFakeUpstream({ name: "second" });
  single = await appOn(first);
  pair = await appOn(first, second);
});
afterEach(() => {
  first.reset();
  second.reset();
});
afterAll(async () => {
  await single.close();
  await pair.close();
  await first.close();
  await second.close();
});

interface Case {
  route: FakeRoute;
  path: string;
  body: () => { body: string | FormData; json: boolean };
}
const json = (body: unknown) => () => ({ body: JSON.stringify(body), json: true });
const form = (fields: Record<string, string>) => () => {
  const data = new FormData();
  for (const [name, value] of Object.entries(fields)) data.set(name, value);
  data.set("file", new Blob([Buffer.alloc(4096, 1)]), "input.png");
  return { body: data, json: false };
};
const JSON_CASES: Case[] = [
  { route: "chat", path: "/chat/completions", body: json({ model: "gpt-4o-mini", messages: [] }) },
  { route: "responses", path: "/responses", body: json({ model: "gpt-4o-mini", input: "hi" }) },
  { route: "embeddings", path: "/embeddings", body: json({ model: "gpt-4o-mini", input: "hi" }) },
  {
    route: "completions",
    path: "/completions",
    body: json({ model: "gpt-4o-mini", prompt: "hi" }),
  },
  { route: "moderations", path: "/moderations", body: json({ model: "gpt-4o-mini", input: "hi" }) },
  {
    route: "images",
    path: "/images/generations",
    body: json({ model: "gpt-image-1", prompt: "x" }),
  },
];
const FORM_CASES: Case[] = [
  { route: "edits", path: "/images/edits", body: form({ model: "gpt-image-1", prompt: "x" }) },
  { route: "variations", path: "/images/variations", body: form({ model: "gpt-image-1" }) },
  { route: "transcriptions", path: "/audio/transcriptions", body: form({ model: "gpt-4o-mini" }) },
  { route: "translations", path: "/audio/translations", body: form({ model: "gpt-4o-mini" }) },
];
const ALL = [...JSON_CASES, ...FORM_CASES];

function call(app: TestApp, { path, body }: Case): Promise<Response> {
  const { body: payload, json: isJson } = body();
  return fetch(`${app.baseURL}${path}`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${app.key}`,
      ...(isJson ? { "content-type": "application/json" } : {}),
    },
    body: payload,
  });
}

const broken = ["cut", "truncated", "garbage"] as const;

describe.each(ALL)("$path, on a broken channel", (test) => {
  it.each(broken)("%s: 502 invalid_response, never a 200 with a broken body", async (kind) => {
    first.behave(test.route, { kind });
    await expectError(await call(single, test), 502, "invalid_response");
  });

  it("stalling after its headers: 504 upstream_timeout after the channel's timeoutSec", async () => {
    first.behave(test.route, { kind: "stall" });
    await expectError(await call(single, test), 504, "upstream_timeout");
  });
});

describe.each(ALL)("$path, on a broken channel with another behind it", (test) => {
  // The broken channel got the whole request and may have run (and billed) it: another
  // channel would run it twice, and a deterministic failure (too large) fails there too.
  it.each(broken)("%s: 502 invalid_response, the second channel never sees it", async (kind) => {
    first.behave(test.route, { kind });
    await expectError(await call(pair, test), 502, "invalid_response");
    expect(first.requests).toHaveLength(1);
    expect(second.requests).toHaveLength(0);
  });
});

describe.each(ALL)("$path, on a channel that holds its whole JSON answer open", (test) => {
  // A proxy or CDN before it that never sends the last chunk: the answer is whole (and paid for).
  const document = { id: "held", object: "x", data: '} ] \\" {'.repeat(500) };
  it.each([
    ["never ended after it", "", true],
    ["followed by more JSON and junk", '{"id":"second"}\njunk', false],
  ])("%s: 200 with the answer, from the one channel", async (_, after, hold) => {
    let closed = false;
    first.behave(test.route, {
      kind: "custom",
      respond: (req, res) => {
        req.socket.once("close", () => (closed = true));
        res.writeHead(200, { "content-type": "application/json" });
        res.write(JSON.stringify(document) + after);
        if (!hold) res.end();
      },
    });
    const response = await call(pair, test);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(document);
    expect(first.requests).toHaveLength(1);
    expect(second.requests).toHaveLength(0);
    // Dropped a second after the answer's object closed: its connection is not left open.
    if (hold) await vi.waitFor(() => expect(closed).toBe(true), { timeout: 5_000 });
  });
});

describe("the openai SDK, with its default retries", () => {
  // The SDK retries a 502 or 504 twice by itself: the service tells it not to
  // (x-should-retry: false), or the channel would get a billed request three times.
  it.each(["cut", "garbage", "stall"] as const)(
    "%s: the channel sees an image generation once",
    async (kind) => {
      first.behave("images", { kind });
      const client = new OpenAI({ apiKey: single.key, baseURL: single.baseURL });
      await expect(client.images.generate({ model: "gpt-image-1", prompt: "x" })).rejects.toThrow(
        kind === "stall" ? /504/ : /502/,
      );
      expect(first.requests).toHaveLength(1);
    },
  );

  it("gets a chat completion whose answer is held open after its JSON, at once", async () => {
    const completion = {
      id: "chatcmpl-held",
      object: "chat.completion",
      created: 1,
      model: "gpt-4o-mini",
      choices: [
        { index: 0, message: { role: "assistant", content: "kept" }, finish_reason: "stop" },
      ],
    };
    first.behave("chat", {
      kind: "custom",
      respond: (_req, res) => {
        res
          .writeHead(200, { "content-type": "application/json" })
          .write(JSON.stringify(completion));
      },
    });
    const client = new OpenAI({ apiKey: single.key, baseURL: single.baseURL });
    // Not a 504 after the channel's timeout (1 s here, 600 s by default).
    const answer = await client.chat.completions.create({ model: "gpt-4o-mini", messages: [] });
    expect(answer.choices[0]?.message.content).toBe("kept");
    expect(first.requests).toHaveLength(1);
  });

  it("retries when no channel could be reached: nothing ran", async () => {
    first.behave("images", { kind: "status", status: 503 });
    const client = new OpenAI({ apiKey: single.key, baseURL: single.baseURL, maxRetries: 1 });
    await expect(client.images.generate({ model: "gpt-image-1", prompt: "x" })).rejects.toThrow(
      /503/,
    );
    expect(first.requests).toHaveLength(2);
  });
});

describe("streams and binary answers", () => {
  it.each([
    ["chat", "/chat/completions", { model: "gpt-4o-mini", messages: [], stream: true }],
    ["responses", "/responses", { model: "gpt-4o-mini", input: "hi", stream: true }],
  ] as const)(
    "a %s stream that stalls is closed after timeoutSec, never looking complete",
    async (route, path, body) => {
      first.behave(route, { kind: "stall" });
      const response = await fetch(`${single.baseURL}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${single.key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(200);
      await expect(response.text()).rejects.toThrow();
    },
  );

  /** A channel that sends `events` as one event stream, then holds it open (never ends it). */
  function holdStreamOpen(route: FakeRoute, events: unknown[], last: string) {
    first.behave(route, {
      kind: "custom",
      respond: (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        for (const event of events) res.write(`data: ${JSON.stringify(event)}\n\n`);
        res.write(last);
      },
    });
  }

  it("a chat stream held open after its [DONE] ends for the client there", async () => {
    const chunk = (content: string, finish: string | null) => ({
      id: "chatcmpl-held",
      object: "chat.completion.chunk",
      created: 1,
      model: "gpt-4o-mini",
      choices: [{ index: 0, delta: { content }, finish_reason: finish }],
    });
    holdStreamOpen("chat", [chunk("he", null), chunk("ld", "stop")], "data: [DONE]\n\n");
    const client = new OpenAI({ apiKey: single.key, baseURL: single.baseURL });
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [],
      stream: true,
    });
    let text = "";
    // Not cut after the channel's timeout (1 s here): the SDK reads a stream to its end.
    for await (const event of stream) text += event.choices[0]?.delta.content ?? "";
    expect(text).toBe("held");
  });

  it("a Responses stream held open after response.completed ends for the client there", async () => {
    const response = {
      id: "resp_held",
      object: "response",
      created_at: 1,
      status: "completed",
      model: "gpt-4o-mini",
      output: [],
      usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
    };
    const completed = `event: response.completed\ndata: ${JSON.stringify({ type: "response.completed", sequence_number: 1, response })}\n\n`;
    holdStreamOpen(
      "responses",
      [
        {
          type: "response.created",
          sequence_number: 0,
          response: { ...response, status: "in_progress" },
        },
      ],
      completed,
    );
    const client = new OpenAI({ apiKey: single.key, baseURL: single.baseURL });
    const stream = await client.responses.create({
      model: "gpt-4o-mini",
      input: "hi",
      stream: true,
    });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types).toEqual(["response.created", "response.completed"]);
  });

  it("speech cut mid-body reaches the client cut, not complete", async () => {
    first.behave("speech", { kind: "cut" });
    const response = await fetch(`${single.baseURL}/audio/speech`, {
      method: "POST",
      headers: { authorization: `Bearer ${single.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", input: "hi", voice: "alloy" }),
    });
    expect(response.status).toBe(200);
    await expect(response.arrayBuffer()).rejects.toThrow();
  });
});
