import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { expectError, sdkError } from "../http/error-envelope.js";
import { UPSTREAM_KEY } from "../support/start-test-app.js";
import {
  appWith,
  clientOf,
  messages,
  postChat,
  refusingBaseUrl,
  until,
  upstream,
} from "./channel-harness.js";

// Which channel a request goes to: priority, weight and model, and the failover rule.
describe("failover between channels", () => {
  it("skips a channel answering 503 for the next priority", async () => {
    const first = await upstream("first");
    const second = await upstream("second");
    first.behave("chat", { kind: "status", status: 503 });
    const app = await appWith([
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
      { name: "first", baseUrl: first.baseUrl, priority: 0 },
    ]);
    const completion = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
    });
    expect(completion.choices[0]?.message.content).toBe("Hello from second!");
    expect(first.requests.map((request) => request.path)).toEqual(["/v1/chat/completions"]);
    expect(second.requests).toHaveLength(1);
    expect(second.requests[0]?.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(second.requests[0]?.body).toEqual({ model: "gpt-4o-mini", messages });
  });

  it("tries the lowest priority first while it answers", async () => {
    const first = await upstream("first");
    const second = await upstream("second");
    const app = await appWith([
      { name: "second", baseUrl: second.baseUrl, priority: 5 },
      { name: "first", baseUrl: first.baseUrl, priority: -1 },
    ]);
    for (let i = 0; i < 5; i++) {
      const completion = await clientOf(app).chat.completions.create({
        model: "gpt-4o-mini",
        messages,
      });
      expect(completion.choices[0]?.message.content).toBe("Hello from first!");
    }
    expect(second.requests).toHaveLength(0);
  });

  it("skips a channel that refuses the connection, also for a stream", async () => {
    const second = await upstream("second");
    const app = await appWith([
      { name: "first", baseUrl: await refusingBaseUrl(), priority: 0 },
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
    ]);
    const completion = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
    });
    expect(completion.choices[0]?.message.content).toBe("Hello from second!");

    const stream = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text).toBe("Hello from second!");
  });

  it("sends a multipart form to the next channel when the first cannot be connected to", async () => {
    const second = await upstream("second");
    const app = await appWith([
      { name: "first", baseUrl: await refusingBaseUrl(), priority: 0 },
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
    ]);
    const form = new FormData();
    form.set("file", new Blob([Buffer.alloc(512 * 1024, 1)]), "a.mp3");
    form.set("model", "gpt-4o-mini");
    const response = await fetch(`${app.baseURL}/audio/transcriptions`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}` },
      body: form,
    });
    expect(await response.json()).toEqual({
      text: "transcribed by second",
      usage: { type: "tokens", input_tokens: 11, output_tokens: 3, total_tokens: 14 },
    });
    expect(second.requests[0]?.form?.files.file?.size).toBe(512 * 1024);
  });

  it("skips a streaming channel answering 502 before any byte", async () => {
    const first = await upstream("first");
    const second = await upstream("second");
    first.behave("chat", { kind: "status", status: 502 });
    const app = await appWith([
      { name: "first", baseUrl: first.baseUrl, priority: 0 },
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
    ]);
    const stream = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text).toBe("Hello from second!");
  });

  it("passes the last channel's 5xx on as it is, status and body", async () => {
    const first = await upstream("first");
    const second = await upstream("second");
    first.behave("chat", { kind: "status", status: 503 });
    const body = {
      error: {
        message: "The engine is overloaded",
        type: "server_error",
        param: null,
        code: "overloaded",
      },
    };
    second.behave("chat", { kind: "status", status: 500, body });
    const app = await appWith([
      { name: "first", baseUrl: first.baseUrl, priority: 0 },
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
    ]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    expect(response.status).toBe(500);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await response.json()).toEqual(body);
    expect(first.requests).toHaveLength(1);
    expect(second.requests).toHaveLength(1);

    const error = await sdkError(
      clientOf(app).chat.completions.create({ model: "gpt-4o-mini", messages }),
    );
    expect(error.status).toBe(500);
    expect(error.code).toBe("overloaded");
  });

  it("passes a channel's 400 on as it is, without trying another channel", async () => {
    const first = await upstream("first");
    const second = await upstream("second");
    const body = {
      error: {
        message: "Invalid value for 'temperature': must be <= 2.",
        type: "invalid_request_error",
        param: "temperature",
        code: "invalid_value",
      },
    };
    first.behave("chat", { kind: "status", status: 400, body });
    const app = await appWith([
      { name: "first", baseUrl: first.baseUrl, priority: 0 },
      { name: "second", baseUrl: second.baseUrl, priority: 1 },
    ]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages, temperature: 9 });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual(body);
    expect(second.requests).toHaveLength(0);

    const error = await sdkError(
      clientOf(app).chat.completions.create({ model: "gpt-4o-mini", messages, temperature: 9 }),
    );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.param).toBe("temperature");
  });

  it("answers 502 upstream_unavailable when no channel can be reached", async () => {
    const app = await appWith([
      { name: "first", baseUrl: await refusingBaseUrl(), priority: 0 },
      { name: "second", baseUrl: await refusingBaseUrl(), priority: 1 },
    ]);
    await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages }),
      502,
      "upstream_unavailable",
    );
    await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages, stream: true }),
      502,
      "upstream_unavailable",
    );
    const error = await sdkError(
      clientOf(app).chat.completions.create({ model: "gpt-4o-mini", messages }),
    );
    expect(error.status).toBe(502);
    expect(error.code).toBe("upstream_unavailable");
  });

  it("answers 502 invalid_response when the only channel resets the connection after the request", async () => {
    const only = await upstream("only");
    only.behave("chat", { kind: "reset" });
    const app = await appWith([{ name: "only", baseUrl: only.baseUrl }]);
    await expectError(
      await postChat(app, { model: "gpt-4o-mini", messages }),
      502,
      "invalid_response",
    );
    expect(only.requests).toHaveLength(1);
  });

  it("answers 504 upstream_timeout when the channel hangs past its timeoutSec", async () => {
    const slow = await upstream("slow");
    const spare = await upstream("spare");
    slow.behave("chat", { kind: "hang" });
    const app = await appWith([
      { name: "slow", baseUrl: slow.baseUrl, timeoutSec: 1, priority: 0 },
      { name: "spare", baseUrl: spare.baseUrl, priority: 1 },
    ]);
    const response = await postChat(app, { model: "gpt-4o-mini", messages });
    await expectError(response, 504, "upstream_timeout");
    // The channel may still be working on it: not retried elsewhere, and the hung call is cut.
    expect(spare.requests).toHaveLength(0);
    await until(() => slow.aborted >= 1);
  });

  it("cuts a stream whose channel goes silent past timeoutSec, so it never looks complete", async () => {
    const slow = await upstream("slow");
    slow.holdStreams();
    const app = await appWith([{ name: "slow", baseUrl: slow.baseUrl, timeoutSec: 1 }]);
    const stream = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      stream: true,
    });
    const received: string[] = [];
    const consume = async () => {
      for await (const chunk of stream) received.push(chunk.choices[0]?.delta.content ?? "");
    };
    await expect(consume()).rejects.toThrow();
    expect(received.join("")).toBe("Hello ");
    await until(() => slow.aborted >= 1);
  });

  it("aborts a hung upstream call when the client goes away", async () => {
    const only = await upstream("only");
    only.behave("chat", { kind: "hang" });
    const app = await appWith([{ name: "only", baseUrl: only.baseUrl }]);
    const controller = new AbortController();
    const arrived = only.nextRequest("chat");
    const call = postChat(app, { model: "gpt-4o-mini", messages }, controller.signal);
    await arrived;
    controller.abort();
    await expect(call).rejects.toThrow();
    await until(() => only.aborted >= 1);
  });

  it("spreads requests over the channels of one priority by weight", async () => {
    const left = await upstream("left");
    const right = await upstream("right");
    const app = await appWith([
      { name: "left", baseUrl: left.baseUrl, weight: 1 },
      { name: "right", baseUrl: right.baseUrl, weight: 1 },
    ]);
    const client = clientOf(app);
    for (let batch = 0; batch < 6; batch++) {
      await Promise.all(
        Array.from({ length: 10 }, () =>
          client.chat.completions.create({ model: "gpt-4o-mini", messages }),
        ),
      );
    }
    expect(left.requests.length + right.requests.length).toBe(60);
    expect(left.requests.length).toBeGreaterThan(0);
    expect(right.requests.length).toBeGreaterThan(0);
  });

  it("keeps a lower priority idle while a higher one answers, whatever its weight", async () => {
    const main = await upstream("main");
    const backup = await upstream("backup");
    const app = await appWith([
      { name: "main", baseUrl: main.baseUrl, priority: 0, weight: 1 },
      { name: "backup", baseUrl: backup.baseUrl, priority: 1, weight: 100 },
    ]);
    const client = clientOf(app);
    await Promise.all(
      Array.from({ length: 10 }, () =>
        client.chat.completions.create({ model: "gpt-4o-mini", messages }),
      ),
    );
    expect(main.requests).toHaveLength(10);
    expect(backup.requests).toHaveLength(0);
  });

  it("routes by model to the channel that serves it", async () => {
    const chat = await upstream("chat");
    const images = await upstream("images");
    const app = await appWith([
      { name: "chat", baseUrl: chat.baseUrl, models: ["gpt-4o-mini"] },
      { name: "images", baseUrl: images.baseUrl, models: ["gpt-image-1"] },
    ]);
    const completion = await clientOf(app).chat.completions.create({
      model: "gpt-4o-mini",
      messages,
    });
    expect(completion.choices[0]?.message.content).toBe("Hello from chat!");
    await clientOf(app).images.generate({ model: "gpt-image-1", prompt: "a cat" });
    expect(images.requests.map((request) => request.path)).toEqual(["/v1/images/generations"]);
    expect(chat.requests.map((request) => request.path)).toEqual(["/v1/chat/completions"]);
  });
});
