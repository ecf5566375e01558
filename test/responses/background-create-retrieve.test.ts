import { Writable } from "node:stream";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { RESPONSE_ID_PATTERN } from "../../src/contract/task-contract.js";
import { startTestApp, TEST_KEYS } from "../support/start-test-app.js";
import { apiError, responseCalls, retrieveUntil, sdk, until } from "./response-helpers.js";
import { scriptChannel } from "./scripted-channel.js";

/** A logger whose JSON lines the test reads. */
function capturedLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  return { lines, logger: pino({ level: "info" }, stream) };
}

describe("POST /v1/responses with background: true, on a channel without background mode", () => {
  it("answers the queued response at once, runs it as a streamed call, and retrieve shows it done", async () => {
    const { lines, logger } = capturedLogger();
    const app = await startTestApp({ logger });
    onTestFinished(() => app.close());
    const channel = scriptChannel(app.upstream, { usage: { input_tokens: 12, output_tokens: 5 } });
    const client = sdk(app);

    const created = await client.responses.create({
      model: "gpt-4o-mini",
      input: "Say hello",
      instructions: "Be brief.",
      background: true,
      metadata: { ticket: "42" },
    });
    expect(created.id).toMatch(RESPONSE_ID_PATTERN);
    expect(created).toMatchObject({
      object: "response",
      status: "queued",
      background: true,
      output: [],
      error: null,
      incomplete_details: null,
      instructions: "Be brief.",
      model: "gpt-4o-mini",
      metadata: { ticket: "42" },
      usage: null,
    });
    expect(typeof created.created_at).toBe("number");

    const done = await retrieveUntil(client, created.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(done.id).toBe(created.id);
    expect(done.background).toBe(true);
    expect(done.created_at).toBe(created.created_at);
    expect(done.output_text).toBe("Hello from the scripted channel!");
    expect(done.usage).toMatchObject({ input_tokens: 12, output_tokens: 5 });
    expect(typeof done.completed_at).toBe("number");

    // The channel got one normal call: streamed, not in the background.
    expect(channel.calls).toBe(1);
    const [sent] = responseCalls(app);
    expect(sent?.body).toEqual({
      model: "gpt-4o-mini",
      input: "Say hello",
      instructions: "Be brief.",
      metadata: { ticket: "42" },
      stream: true,
    });

    // Task lines with their kind, and the token metrics.
    await until(() => lines.some((line) => line.msg === "task.completed"), "task.completed");
    const taskLines = lines.filter((line) => String(line.msg).startsWith("task."));
    expect(taskLines.map((line) => line.msg)).toEqual([
      "task.submitted",
      "task.started",
      "task.completed",
    ]);
    for (const line of taskLines) {
      expect(line).toMatchObject({ task_id: created.id, kind: "response", model: "gpt-4o-mini" });
    }
    expect(taskLines[2]).toMatchObject({ channel: "fake" });
    const metrics = await (await fetch(`${app.url}/metrics`)).text();
    expect(metrics).toMatch(
      /tokens_total\{[^}]*channel="fake"[^}]*model="gpt-4o-mini"[^}]*group="default"[^}]*type="input"[^}]*\} 12/,
    );
    // The GenAI client metrics of its channel call, as a chat operation.
    expect(metrics).toMatch(
      /gen_ai_client_token_usage_sum\{[^}]*operation[^}]*="chat"[^}]*token_type="input"[^}]*\} 12/,
    );
  });

  it("answers another key's response as it answers an unknown id: 404 in OpenAI's envelope", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    scriptChannel(app.upstream);
    const owner = sdk(app);
    const other = sdk(app, TEST_KEYS.other);
    const { id } = await owner.responses.create({
      model: "gpt-4o-mini",
      input: "mine",
      background: true,
    });
    await retrieveUntil(owner, id, ["completed"]);
    const unknownId = "resp_AAAAAAAAAAAAAAAAAAAAAA";
    const unknown = await apiError(other.responses.retrieve(unknownId));
    for (const attempt of [
      () => other.responses.retrieve(id),
      () => other.responses.cancel(id),
      () => other.responses.delete(id),
      () => other.responses.inputItems.list(id),
    ]) {
      const refused = await apiError(attempt());
      expect(refused.status).toBe(404);
      expect(JSON.stringify(refused.error).replaceAll(id, unknownId)).toBe(
        JSON.stringify(unknown.error),
      );
    }
    expect(unknown).toMatchObject({
      status: 404,
      error: { type: "invalid_request_error", code: "response_not_found", param: null },
    });
    // The owner still has it.
    expect((await owner.responses.retrieve(id)).status).toBe("completed");
  });

  it("keeps idempotent retries to one response, refuses store: false, and lists its input", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const channel = scriptChannel(app.upstream);
    const client = sdk(app);
    const body = { model: "gpt-4o-mini", input: "once", background: true } as const;
    const retry = { headers: { "Idempotency-Key": "retry-1" } };
    const first = await client.responses.create(body, retry);
    const again = await client.responses.create(body, retry);
    expect(again.id).toBe(first.id);
    await retrieveUntil(client, first.id, ["completed"]);
    expect(channel.calls).toBe(1);

    const refused = await apiError(client.responses.create({ ...body, store: false }));
    expect(refused).toMatchObject({
      status: 400,
      error: { code: "invalid_value", param: "store" },
    });

    const items = await client.responses.inputItems.list(first.id);
    expect(items.data).toHaveLength(1);
    expect(items.data[0]).toMatchObject({
      type: "message",
      role: "user",
      content: [{ type: "input_text", text: "once" }],
    });
  });

  it("ends incomplete when the channel's response does (max_output_tokens), its text and usage kept", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    scriptChannel(app.upstream, { incomplete: true, usage: { input_tokens: 9, output_tokens: 4 } });
    const client = sdk(app);
    const { id } = await client.responses.create({
      model: "gpt-4o-mini",
      input: "Say a lot",
      max_output_tokens: 4,
      background: true,
    });
    const ended = await retrieveUntil(client, id, ["incomplete", "completed", "failed"]);
    expect(ended).toMatchObject({
      id,
      status: "incomplete",
      background: true,
      incomplete_details: { reason: "max_output_tokens" },
      error: null,
      usage: { input_tokens: 9, output_tokens: 4 },
    });
    expect(ended.output_text).toBe("Hello from the scripted channel!");
    // A cancel of an ended response changes nothing: it answers the response as it ended.
    expect((await client.responses.cancel(id)).status).toBe("incomplete");
    expect((await client.responses.retrieve(id)).status).toBe("incomplete");
  });

  it("fails the response with the channel's own error, and keeps image tasks' list free of it", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    app.upstream.behave("responses", {
      kind: "status",
      status: 429,
      body: {
        error: { message: "Slow down.", type: "rate_limit_error", code: "rate_limit_exceeded" },
      },
    });
    const client = sdk(app);
    const { id } = await client.responses.create({
      model: "gpt-4o-mini",
      input: "too fast",
      background: true,
    });
    const failed = await retrieveUntil(client, id, ["failed", "completed"]);
    expect(failed.status).toBe("failed");
    expect(failed.error).toEqual({ code: "rate_limit_exceeded", message: "Slow down." });

    const list = await fetch(`${app.url}/v1/images/tasks`, {
      headers: { authorization: `Bearer ${app.key}` },
    });
    expect(((await list.json()) as { data: unknown[] }).data).toEqual([]);
    // Nor does an image task route reach it.
    const poll = await fetch(`${app.url}/v1/images/tasks/${id}`, {
      headers: { authorization: `Bearer ${app.key}` },
    });
    expect(poll.status).toBe(404);
  });
});
