import { slow } from "../support/time-factor.js";
import { describe, expect, it } from "vitest";
import { drawDemoImage, parseDemoImageSize } from "../../src/demo/draw-demo-image.js";
import { encodePng } from "../../src/demo/png-encoder.js";

function distinctColours(pixels: Uint8Array): number {
  const seen = new Set<number>();
  for (let p = 0; p < pixels.length; p += 3) {
    seen.add((pixels[p]! << 16) | (pixels[p + 1]! << 8) | pixels[p + 2]!);
  }
  return seen.size;
}

describe("parseDemoImageSize", () => {
  it.each([
    [undefined, { width: 1024, height: 1024 }],
    ["auto", { width: 1024, height: 1024 }],
    ["1536x1024", { width: 1536, height: 1024 }],
    ["256x512", { width: 256, height: 512 }],
    ["4000x8", { width: 2048, height: 16 }],
    ["0x99999", { width: 16, height: 2048 }],
  ])("%s -> %o", (input, expected) => {
    expect(parseDemoImageSize(input)).toEqual(expected);
  });

  it.each(["big", "1024", "1024x", "x1024", "-5x10", "10.5x10", 1024, {}])(
    "rejects %o",
    (input) => {
      expect(parseDemoImageSize(input)).toBeUndefined();
    },
  );
});

describe("drawDemoImage", () => {
  it("is deterministic per prompt and variant, and differs across them", () => {
    const size = { width: 64, height: 48 };
    const a = drawDemoImage("a red fox", size);
    expect(a.width).toBe(64);
    expect(a.height).toBe(48);
    expect(a.channels).toBe(3);
    expect(a.pixels.length).toBe(64 * 48 * 3);
    expect(Buffer.from(drawDemoImage("a red fox", size).pixels).equals(a.pixels)).toBe(true);
    expect(Buffer.from(drawDemoImage("a blue fox", size).pixels).equals(a.pixels)).toBe(false);
    expect(Buffer.from(drawDemoImage("a red fox", size, 1).pixels).equals(a.pixels)).toBe(false);
  });

  it("draws a non-trivial picture", () => {
    const image = drawDemoImage("a lighthouse at dusk", { width: 256, height: 256 });
    expect(distinctColours(image.pixels)).toBeGreaterThan(200);
  });

  it("draws and encodes 1024x1024 quickly", () => {
    // Measured around 20 ms; the bound only catches an accidental slow path (e.g. O(n^2)), and
    // stretches with the load (2.8 s in a loaded CI run).
    const started = performance.now();
    const png = encodePng(drawDemoImage("speed", { width: 1024, height: 1024 }));
    expect(performance.now() - started).toBeLessThan(slow(1500));
    expect(png.length).toBeGreaterThan(1000);
  });
});
