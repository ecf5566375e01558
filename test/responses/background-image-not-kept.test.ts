import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { captureLines } from "../logging/capture-lines.js";
import { startFakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY } from "../support/start-test-app.js";
import { readEvents, retrieveUntil, sdk } from "./response-helpers.js";
import { scriptChannel, testPng } from "./scripted-channel.js";

/*
 * A background response whose image_generation_call holds a result that is no image (a gateway
 * that mangled it, say): the response's text and usage were made and billed, so it completes
 * with them and the call shows as OpenAI shows one that made no image, `failed` with a null
 * `result`; one warning tells the operator.
 */

const NOT_AN_IMAGE = Buffer.from("GIF89a not one of ours");

/** An app whose channel answers `image` as its image call's result, taking images up to `maxImageBytes`. */
async function appWithImage(image: Buffer = NOT_AN_IMAGE, maxImageBytes?: number) {
  const { lines, stream } = captureLines();
  const upstream = await startFakeUpstream();
  onTestFinished(() => upstream.close());
  const channel = {
    name: "fake",
    baseUrl: upstream.baseUrl,
    apiKey: UPSTREAM_KEY,
    models: ["gpt-4o-mini"],
    ...(maxImageBytes ? { maxImageBytes } : {}),
  };
  const app = await startTestApp({
    upstream,
    logger: pino({ level: "info" }, stream),
    config: { channels: [channel] },
  });
  onTestFinished(() => app.close());
  scriptChannel(app.upstream, {
    words: ["Here", " it", " is"],
    image: { png: image, partials: 0 },
    usage: { input_tokens: 7, output_tokens: 11 },
  });
  const warnings = () =>
    lines
      .map((line) => JSON.parse(line) as { msg: string; skipped?: string })
      .filter((line) => line.msg === "skipped an image of the channel's answer");
  return { app, warnings };
}

const failedCall = { type: "image_generation_call", status: "failed", result: null };

/** The events of a streamed background response with the image tool, as the SDK reads them. */
async function streamedEvents(app: Parameters<typeof sdk>[0], input: string) {
  const stream = await sdk(app).responses.create({
    model: "gpt-4o-mini",
    input,
    background: true,
    stream: true,
    tools: [{ type: "image_generation" }],
  });
  return readEvents(stream);
}

describe("a background response whose image call's result is not an image", () => {
  it.each([
    ["not a PNG, JPEG or WebP", () => appWithImage()],
    ["larger than 4096 bytes", () => appWithImage(testPng(64), 4096)],
  ])("(%s) completes with its text and usage, the call failed", async (why, start) => {
    const { app, warnings } = await start();
    const client = sdk(app);
    const { id } = await client.responses.create({
      model: "gpt-4o-mini",
      input: "draw and say",
      background: true,
      tools: [{ type: "image_generation" }],
    });
    const done = await retrieveUntil(client, id, ["completed", "failed"]);
    expect(done.status, JSON.stringify(done.error)).toBe("completed");
    expect(done.output[0]).toMatchObject(failedCall);
    expect(done.output_text).toBe("Here it is");
    expect(done.usage).toMatchObject({ input_tokens: 7, output_tokens: 11 });
    expect(warnings()).toEqual([
      expect.objectContaining({
        skipped: `an image_generation_call's result (${why})`,
      }),
    ]);
  });

  it("streams the call as failed, in its item's events and in the final response", async () => {
    const { app, warnings } = await appWithImage();
    const events = await streamedEvents(app, "draw and say, streamed");
    const itemDone = events.find(
      (event) =>
        event.type === "response.output_item.done" && event.item.type === "image_generation_call",
    );
    expect(itemDone).toMatchObject({ item: failedCall });
    // Not first announced as completed: OpenAI's stream has no failed event to send instead.
    const types = events.map((event) => event.type);
    expect(types).toContain("response.image_generation_call.generating");
    expect(types).not.toContain("response.image_generation_call.completed");
    const last = events.at(-1)!;
    expect(last.type).toBe("response.completed");
    const final = (last as Extract<ResponseStreamEvent, { type: "response.completed" }>).response;
    expect(final.output[0]).toMatchObject(failedCall);
    expect(final.output[1]).toMatchObject({
      type: "message",
      content: [expect.objectContaining({ text: "Here it is" })],
    });
    // Warned of once, though the channel sent the result twice (its item, the final response).
    expect(warnings()).toHaveLength(1);
  });

  it("streams an image call whose result is kept as completed, just before its item", async () => {
    const { app, warnings } = await appWithImage(testPng(16));
    const types = (await streamedEvents(app, "draw and say, streamed")).map((event) => event.type);
    const completed = types.indexOf("response.image_generation_call.completed");
    expect(completed, types.join(", ")).toBeGreaterThan(
      types.indexOf("response.image_generation_call.generating"),
    );
    expect(types[completed + 1]).toBe("response.output_item.done");
    expect(types.at(-1)).toBe("response.completed");
    expect(warnings()).toEqual([]);
  });

  it("holds each of three interleaved calls' completed event for its own item", async () => {
    const { app } = await appWithImage();
    const good = testPng(16).toString("base64");
    const bad = NOT_AN_IMAGE.toString("base64");
    const call = (id: string, status: string, result?: string) => ({
      type: "image_generation_call",
      id,
      status,
      ...(result === undefined ? {} : { result }),
    });
    const final = { id: "resp_up", object: "response", status: "completed" };
    // A fails at its done; B's and C's dones never come: the final response shows B kept, C failed.
    const sent = [
      { type: "response.output_item.added", output_index: 0, item: call("ig_a", "in_progress") },
      { type: "response.output_item.added", output_index: 1, item: call("ig_b", "in_progress") },
      { type: "response.output_item.added", output_index: 2, item: call("ig_c", "in_progress") },
      ...["ig_a", "ig_b", "ig_c"].map((id, output_index) => ({
        type: "response.image_generation_call.completed",
        output_index,
        item_id: id,
      })),
      { type: "response.output_item.done", output_index: 0, item: call("ig_a", "completed", bad) },
      {
        type: "response.completed",
        response: {
          ...final,
          output: [
            call("ig_a", "completed", bad),
            call("ig_b", "completed", good),
            call("ig_c", "completed", bad),
          ],
        },
      },
    ];
    app.upstream.behave("responses", {
      kind: "custom",
      respond: (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        for (const event of sent) res.write(`data: ${JSON.stringify(event)}\n\n`);
        res.end();
      },
    });
    const events = await streamedEvents(app, "draw three");
    const told = events.flatMap((event) =>
      event.type === "response.image_generation_call.completed" ? [event.item_id] : [],
    );
    expect(told).toEqual(["ig_b"]);
    const types = events.map((event) => event.type);
    expect(types.indexOf("response.image_generation_call.completed")).toBe(types.length - 2);
    const last = events.at(-1) as Extract<ResponseStreamEvent, { type: "response.completed" }>;
    expect(last.response.output.map((item) => (item as { status?: string }).status)).toEqual([
      "failed",
      "completed",
      "failed",
    ]);
  });
});
