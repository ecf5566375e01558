import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDemoService, type DemoService } from "../demo/demo-service.js";
import { inspectPng } from "../demo/inspect-png.js";
import { readEvents, retrieveUntil } from "./response-helpers.js";

/*
 * The demo channel answers the Responses API's image_generation tool, so
 * background responses with images can be tried on the defaults.
 */

let demo: DemoService;
beforeAll(async () => {
  demo = await startDemoService();
});
afterAll(() => demo.server.close(100));

/** The `image_generation_call` items of an output. */
function imageCalls(output: readonly unknown[]): Array<{ result: string; status: string }> {
  return output.filter(
    (item) => (item as { type?: string }).type === "image_generation_call",
  ) as Array<{ result: string; status: string }>;
}

describe("the demo channel's image_generation tool", () => {
  it("answers a plain call with an image_generation_call holding a real PNG, then its message", async () => {
    const response = await demo.client.responses.create({
      model: "gpt-4o-mini",
      input: "a lighthouse at dusk",
      tools: [{ type: "image_generation", size: "96x64" }],
    });
    expect(response.output.map((item) => item.type)).toEqual(["image_generation_call", "message"]);
    const [call] = imageCalls(response.output);
    expect(call!.status).toBe("completed");
    const png = inspectPng(Buffer.from(call!.result, "base64"));
    expect([png.width, png.height]).toEqual([96, 64]);
    expect(response.output_text).toContain("a lighthouse at dusk");
  });

  it("streams partial images when asked, then the picture", async () => {
    const stream = await demo.client.responses.create({
      model: "gpt-4o-mini",
      input: "a lighthouse at dawn",
      tools: [{ type: "image_generation", size: "64x64", partial_images: 2 }],
      stream: true,
    });
    const events = await readEvents(stream);
    const partials = events.filter(
      (event) => event.type === "response.image_generation_call.partial_image",
    ) as Array<{ partial_image_index: number; partial_image_b64: string }>;
    expect(partials.map((event) => event.partial_image_index)).toEqual([0, 1]);
    for (const partial of partials) {
      expect(inspectPng(Buffer.from(partial.partial_image_b64, "base64")).width).toBe(64);
    }
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, i) => i));
    const completed = events.at(-1) as { type: string; response: { output: unknown[] } };
    expect(completed.type).toBe("response.completed");
    expect(imageCalls(completed.response.output)).toHaveLength(1);
  });

  it("runs in the background on the defaults: the picture comes back on retrieve", async () => {
    const created = await demo.client.responses.create({
      model: "gpt-4o-mini",
      input: "a lighthouse at night",
      tools: [{ type: "image_generation", size: "32x32", partial_images: 1 }],
      background: true,
    });
    expect(created.status).toBe("queued");
    const done = await retrieveUntil(demo.client, created.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    const [call] = imageCalls(done.output);
    expect(inspectPng(Buffer.from(call!.result, "base64")).width).toBe(32);
  });

  it("draws nothing when the request offers no image tool, or refuses it", async () => {
    const response = await demo.client.responses.create({
      model: "gpt-4o-mini",
      input: "no picture",
      tools: [{ type: "image_generation" }],
      tool_choice: "none",
    });
    expect(response.output.map((item) => item.type)).toEqual(["message"]);
  });
});
