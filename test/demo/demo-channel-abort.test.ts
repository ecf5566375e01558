import { afterEach, describe, expect, it, vi } from "vitest";
import * as draw from "../../src/demo/draw-demo-image.js";
import { slow } from "../support/time-factor.js";
import { startDemoChannel, type DemoChannel } from "../../src/demo/start-demo-channel.js";

// Counts pictures drawn, to see whether a generation went on after its client left.
vi.mock("../../src/demo/draw-demo-image.js", { spy: true });

let demo: DemoChannel | undefined;
afterEach(async () => {
  await demo?.close();
  vi.mocked(draw.drawDemoImage).mockClear();
});

function generate(baseUrl: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${baseUrl}/images/generations`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "gpt-image-1", prompt: "p", size: "32x32" }),
    signal,
  });
}

describe("demo channel image delay", () => {
  it("draws once the delay is over", async () => {
    demo = await startDemoChannel({ imageDelayMs: 100 });
    const res = await generate(demo.baseUrl);
    expect(res.status).toBe(200);
    expect(draw.drawDemoImage).toHaveBeenCalledTimes(1);
  });

  it("does not draw for a client that went away during the delay", async () => {
    // A delay no event-loop stall reaches: in CI a 100 ms one ran out before the client's
    // 30 ms abort timer fired, and the picture was drawn for a client still there.
    const delayMs = slow(1_000);
    demo = await startDemoChannel({ imageDelayMs: delayMs });
    const controller = new AbortController();
    const pending = generate(demo.baseUrl, controller.signal).catch((e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 30));
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    // Well past the delay: an unaborted wait would have drawn by now.
    await new Promise((resolve) => setTimeout(resolve, delayMs + 250));
    expect(draw.drawDemoImage).not.toHaveBeenCalled();
  });
});
