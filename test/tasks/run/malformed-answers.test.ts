import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { captureLines } from "../../logging/capture-lines.js";
import { TINY_PNG_B64 } from "../../support/fake-answers.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import { retrieveUntil, sdk } from "../../responses/response-helpers.js";
import { PNG_MAGIC, submitOk, useApp, waitForStatus } from "../task-api.js";

/*
 * Channel answers that parse but are not what they claim. One nested thousands of levels deep: V8 parses it (its JSON.parse does not
 * recurse), and whatever serialises it afterwards (the task's store write, the event log) runs
 * out of stack. The run must not: a streamed generation keeps its image and drops the usage past
 * the depth a plain answer's is kept to; a background response whose channel sends such an event
 * fails as any answer of no known shape does (`invalid_response`, said in its message), with
 * nothing logged as an error. And a background response's final event without the response it
 * ends: a stream client would read a `response.completed` it cannot use, a retrieve a failure;
 * or one whose output is not a list of items, which the SDKs' `output_text` walks.
 */

const DEEP = `${'{"inner":'.repeat(20_000)}{"total_tokens":1}${"}".repeat(20_000)}`;

/**
 * A channel that answers every call with `contentType` and `body` (and `status`); with `hold`,
 * the answer is never ended (the connection stays open until the test ends).
 */
async function channelAnswering(
  contentType: string,
  body: string,
  hold = false,
  status = 200,
): Promise<string> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(status, { "content-type": contentType });
      if (hold) res.write(body);
      else res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onTestFinished(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

/**
 * The service in front of the channel at `baseUrl` (`extra`: more of its settings), and of the
 * channel at `next` behind it when given.
 */
async function appBefore(baseUrl: string, extra: Record<string, unknown> = {}, next?: string) {
  const { lines, stream } = captureLines();
  const models = ["gpt-image-1", "gpt-4o-mini"];
  const app = await useApp({
    logger: pino({ level: "info" }, stream),
    config: {
      channels: [
        { name: "odd", baseUrl, apiKey: UPSTREAM_KEY, models, ...extra },
        // The next channel, tried after the odd one refused.
        ...(next
          ? [{ name: "next", baseUrl: next, apiKey: UPSTREAM_KEY, models, priority: 1 }]
          : []),
      ],
    },
  });
  const errors = () => lines.filter((line) => (JSON.parse(line) as { level: number }).level >= 50);
  const skipped = () =>
    lines.filter((line) => line.includes('"msg":"skipped what the channel\'s event stream held"'));
  return { app, errors, skipped };
}

/** A background response to `input`, created with the openai SDK and retrieved until it ended. */
async function backgroundResponse(
  app: { baseURL: string; key: string },
  input: string,
  timeoutMs?: number,
) {
  const client = sdk(app);
  const { id } = await client.responses.create({ model: "gpt-4o-mini", input, background: true });
  const done = await retrieveUntil(client, id, ["completed", "failed", "incomplete"], timeoutMs);
  return { client, id, done };
}

const event = (json: string) => `data: ${json}\n\n`;

describe("a channel's answer nested 20,000 levels deep", () => {
  it("a streamed generation with such a usage completes with its image", async () => {
    const baseUrl = await channelAnswering(
      "text/event-stream",
      event(`{"type":"image_generation.partial_image","b64_json":"${TINY_PNG_B64}"}`) +
        event(`{"type":"image_generation.completed","b64_json":"${TINY_PNG_B64}","usage":${DEEP}}`),
    );
    const { app, errors } = await appBefore(baseUrl);
    const id = await submitOk(app, { prompt: "deep usage", partial_images: 1 });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    const image = Buffer.from(done.body.data![0]!.b64_json!, "base64");
    expect(image.subarray(0, 8)).toEqual(PNG_MAGIC);
    expect(errors()).toEqual([]);
  });

  it.each([
    [
      "a streamed event",
      "text/event-stream",
      event('{"type":"response.output_text.delta","delta":"hi"}') +
        event(
          `{"type":"response.completed","response":{"id":"resp_up","status":"completed","output":[],"usage":${DEEP}}}`,
        ),
    ],
    [
      "a plain JSON answer",
      "application/json",
      `{"id":"resp_up","object":"response","status":"completed","output":[],"usage":${DEEP}}`,
    ],
  ])(
    "a background response whose channel sends it in %s fails, said why",
    async (_, type, body) => {
      const { app, errors } = await appBefore(await channelAnswering(type, body));
      const { done } = await backgroundResponse(app, "deep");
      expect(done.error?.message).toBe(
        "The upstream channel's answer nests JSON deeper than 256 levels.",
      );
      expect(errors()).toEqual([]);
    },
  );
});

describe("a background response's final event without its response object", () => {
  it.each(["response.completed", "response.failed", "response.incomplete"])(
    "%s with a string for its response: the response fails, its stream ends with it",
    async (type) => {
      const { app, errors } = await appBefore(
        await channelAnswering(
          "text/event-stream",
          event('{"type":"response.output_text.delta","delta":"hi"}') +
            event(`{"type":"${type}","response":"done"}`),
        ),
      );
      const { client, id, done } = await backgroundResponse(app, "odd end");
      expect(done.status).toBe("failed");
      expect(done.error?.message).toBe(
        `The upstream channel's answer has a ${type} event without a response object.`,
      );
      const events = await client.responses.retrieve(id, { stream: true });
      const types: string[] = [];
      for await (const streamed of events) types.push(streamed.type);
      expect(types.at(-1)).toBe("response.failed");
      expect(errors()).toEqual([]);
    },
  );
});

describe("a background response's final output that is not a list of items", () => {
  it.each([
    [
      "a string",
      "text/event-stream",
      event('{"type":"response.completed","response":{"output":"hi"}}'),
    ],
    [
      "a list with null",
      "text/event-stream",
      event('{"type":"response.completed","response":{"output":[null]}}'),
    ],
    [
      "a string, answered plain",
      "application/json",
      '{"object":"response","status":"completed","output":"hi"}',
    ],
  ])("%s: the response fails, where the SDK's output_text would throw", async (_, type, body) => {
    const { app, errors } = await appBefore(await channelAnswering(type, body));
    const { done } = await backgroundResponse(app, "odd output");
    expect(done.status).toBe("failed");
    expect(done.error?.message).toBe(
      "The upstream channel's answer has a final response whose output is not a list of items.",
    );
    expect(done.output_text).toBe("");
    expect(errors()).toEqual([]);
  });
});

describe("an OpenAI background channel that streams more partial images than asked", () => {
  it("keeps as many as the task asked for", async () => {
    const partial = (index: number) =>
      event(
        `{"type":"response.image_generation_call.partial_image","partial_image_index":${index},"partial_image_b64":"${TINY_PNG_B64}"}`,
      );
    const baseUrl = await channelAnswering(
      "text/event-stream",
      event('{"type":"response.created","response":{"id":"resp_many","status":"queued"}}') +
        [0, 1, 2, 3, 4, 5].map(partial).join("") +
        event(
          `{"type":"response.completed","response":{"id":"resp_many","status":"completed","output":[{"type":"image_generation_call","status":"completed","result":"${TINY_PNG_B64}"}]}}`,
        ),
    );
    const { app, errors } = await appBefore(baseUrl, {
      async: "openai-background",
      responsesModel: "gpt-4.1-mini",
      pollSec: 1,
    });
    const id = await submitOk(app, { prompt: "many drafts", partial_images: 2 });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    const metrics = await (await fetch(`${app.url}/metrics`)).text();
    expect(metrics).toContain('image_task_sidecar_task_partial_images_total{outcome="stored"} 2\n');
    expect(errors()).toEqual([]);
  });
});

describe("a background response's stream that goes on after its end", () => {
  it.each([
    ["an event that is not JSON", "data: {not json\n\n"],
    ["JSON nested 20,000 deep", event(DEEP)],
    ["an error event", event('{"type":"error","code":"late","message":"too late"}')],
  ])("with %s: the end it had counts", async (_, after) => {
    const { app, errors } = await appBefore(
      await channelAnswering(
        "text/event-stream",
        event('{"type":"response.output_text.delta","delta":"hi"}') +
          event(
            '{"type":"response.completed","response":{"id":"resp_up","status":"completed","output":[]}}',
          ) +
          after,
      ),
    );
    const { done } = await backgroundResponse(app, "late junk");
    expect(done.status, JSON.stringify(done.error)).toBe("completed");
    expect(errors()).toEqual([]);
  });
});

describe("a background response's stream held open after its end", () => {
  it("completes at its end, not at the task's timeout", async () => {
    const { app, errors } = await appBefore(
      await channelAnswering(
        "text/event-stream",
        event(
          '{"type":"response.completed","response":{"id":"resp_up","status":"completed","output":[]}}',
        ),
        true,
      ),
    );
    // Far below the test app's task timeout (600 s): the end is the response's.
    const { done } = await backgroundResponse(app, "held open", 10_000);
    expect(done.status).toBe("completed");
    expect(errors()).toEqual([]);
  });
});

describe("a streamed generation that goes on after its image was completed", () => {
  const imageEvent = (type: string) =>
    event(`{"type":"image_generation.${type}","b64_json":"${TINY_PNG_B64}"}`);
  it.each([
    ["held open", "", true],
    ["with an event that is not JSON", "data: {not json\n\n", false],
    ["with more images than asked for", imageEvent("completed").repeat(2), false],
  ])("%s: the task completes with its paid image", async (_, after, hold) => {
    const baseUrl = await channelAnswering(
      "text/event-stream",
      imageEvent("partial_image") + imageEvent("completed") + after,
      hold,
    );
    const { app, errors } = await appBefore(baseUrl);
    const id = await submitOk(app, { prompt: "held after its end", partial_images: 1 });
    // Far below the test app's task timeout (600 s): the end is the image's.
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.data).toHaveLength(1);
    expect(Buffer.from(done.body.data![0]!.b64_json!, "base64").subarray(0, 8)).toEqual(PNG_MAGIC);
    expect(errors()).toEqual([]);
  });
});

describe("an event that is no JSON object before the end", () => {
  const junk = "data: {not json\n\n" + event("[1,2]") + event("42");
  it("a streamed generation skips it and completes with its image", async () => {
    const baseUrl = await channelAnswering(
      "text/event-stream",
      junk + event(`{"type":"image_generation.completed","b64_json":"${TINY_PNG_B64}"}`),
    );
    const { app, errors, skipped } = await appBefore(baseUrl);
    const id = await submitOk(app, { prompt: "junk first", partial_images: 1 });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expect(errors()).toEqual([]);
    // Said once, for the operator: the channel sends junk.
    expect(skipped()).toHaveLength(1);
    expect(skipped()[0]).toContain(`"taskId":"${id}"`);
  });

  it("a background response skips it and completes with its output", async () => {
    const { app, errors, skipped } = await appBefore(
      await channelAnswering(
        "text/event-stream",
        event('{"type":"response.output_text.delta","delta":"hi"}') +
          junk +
          event(
            '{"type":"response.completed","response":{"id":"resp_up","status":"completed","output":[]}}',
          ),
      ),
    );
    const { done } = await backgroundResponse(app, "junk first");
    expect(done.status, JSON.stringify(done.error)).toBe("completed");
    expect(errors()).toEqual([]);
    expect(skipped()).toHaveLength(1);
  });
});

describe("a plain JSON answer that goes on after its object closed", () => {
  const generation = `{"created":1,"data":[{"b64_json":"${TINY_PNG_B64}","revised_prompt":"} ]"}]}`;
  it.each([
    ["held open (a proxy that never sends the last chunk)", "", true],
    ["followed by more JSON and junk", '{"data":[]}\nnot json', false],
  ])("%s: the task completes with its paid image", async (_, after, hold) => {
    const { app, errors } = await appBefore(
      await channelAnswering("application/json", generation + after, hold),
    );
    const id = await submitOk(app, { prompt: "held JSON" });
    // Far below the test app's task timeout (600 s): the end is the object's.
    const done = await waitForStatus(app, id, ["completed", "failed"], 5_000);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.data).toHaveLength(1);
    expect(Buffer.from(done.body.data![0]!.b64_json!, "base64").subarray(0, 8)).toEqual(PNG_MAGIC);
    expect(errors()).toEqual([]);
  });

  it("followed by more than an answer may hold: the task completes with its paid image", async () => {
    // The answer may hold one image of 1,000 bytes and 256 KiB more: the junk is past that.
    const junk = " ".repeat(64 * 1024) + "x".repeat(400 * 1024);
    const { app, errors } = await appBefore(
      await channelAnswering("application/json", generation + junk),
      { maxImageBytes: 1000 },
    );
    const id = await submitOk(app, { prompt: "long junk" });
    const done = await waitForStatus(app, id, ["completed", "failed"], 5_000);
    expect(done.body.status, done.text).toBe("completed");
    expect(errors()).toEqual([]);
  });

  it("held open, a background response completes with its output", async () => {
    const { app, errors } = await appBefore(
      await channelAnswering(
        "application/json",
        '{"id":"resp_up","object":"response","status":"completed","output":[]}',
        true,
      ),
    );
    const { done } = await backgroundResponse(app, "held JSON", 5_000);
    expect(done.status, JSON.stringify(done.error)).toBe("completed");
    expect(errors()).toEqual([]);
  });

  it("a refusal held open: the next channel is tried at once, and makes the image", async () => {
    const refusing = await channelAnswering(
      "application/json",
      '{"error":{"code":"rate_limit_exceeded","message":"Slow down."}}',
      true,
      429,
    );
    const answering = await channelAnswering("application/json", generation);
    const { app, errors } = await appBefore(refusing, {}, answering);
    const id = await submitOk(app, { prompt: "refused, held" });
    const done = await waitForStatus(app, id, ["completed", "failed"], 5_000);
    expect(done.body.status, done.text).toBe("completed");
    expect(errors()).toEqual([]);
  });

  it("an error held open fails a task and a response with its message, not at their timeout", async () => {
    const baseUrl = await channelAnswering(
      "application/json",
      '{"error":{"code":"content_policy_violation","message":"Refused."}}',
      true,
      400,
    );
    const { app, errors } = await appBefore(baseUrl);
    const id = await submitOk(app, { prompt: "held error" });
    const done = await waitForStatus(app, id, ["completed", "failed"], 5_000);
    expect(done.body.status).toBe("failed");
    expect(done.body.error).toMatchObject({
      code: "content_policy_violation",
      message: "Refused.",
    });
    const response = (await backgroundResponse(app, "held error", 5_000)).done;
    expect(response.status).toBe("failed");
    expect(response.error).toMatchObject({ message: "Refused." });
    expect(errors()).toEqual([]);
  });
});
