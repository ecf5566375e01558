import { describe, expect, it } from "vitest";
import { encodePng } from "../../src/demo/png-encoder.js";
import { inspectPng, referenceCrc32 } from "./inspect-png.js";

function patternPixels(width: number, height: number, channels: number): Uint8Array {
  const pixels = new Uint8Array(width * height * channels);
  for (let i = 0; i < pixels.length; i++) pixels[i] = (i * 37 + (i >> 5)) & 0xff;
  return pixels;
}

describe("encodePng", () => {
  it("reference CRC matches the PNG spec's check value", () => {
    // CRC-32 of "123456789" is 0xCBF43926; guards the checker used by the tests below.
    expect(referenceCrc32(Buffer.from("123456789"))).toBe(0xcbf43926);
  });

  it.each([
    { channels: 3 as const, colorType: 2 },
    { channels: 4 as const, colorType: 6 },
  ])("writes a valid $channels-channel PNG", ({ channels, colorType }) => {
    const width = 37;
    const height = 23;
    const pixels = patternPixels(width, height, channels);
    const png = inspectPng(encodePng({ width, height, channels, pixels }));

    expect(png.width).toBe(width);
    expect(png.height).toBe(height);
    expect(png.bitDepth).toBe(8);
    expect(png.colorType).toBe(colorType);
    expect(png.chunks.map((c) => c.type)).toEqual(["IHDR", "IDAT", "IEND"]);
    for (const chunk of png.chunks) expect(chunk.crcValid, chunk.type).toBe(true);

    const stride = width * channels;
    expect(png.scanlines.length).toBe((stride + 1) * height);
    for (let y = 0; y < height; y++) {
      const row = png.scanlines.subarray(y * (stride + 1), (y + 1) * (stride + 1));
      expect(row[0]).toBe(0);
      expect(
        Buffer.from(row.subarray(1)).equals(pixels.subarray(y * stride, (y + 1) * stride)),
      ).toBe(true);
    }
  });

  it("handles a 1x1 image", () => {
    const png = inspectPng(
      encodePng({ width: 1, height: 1, channels: 3, pixels: new Uint8Array(3) }),
    );
    expect([png.width, png.height, png.scanlines.length]).toEqual([1, 1, 4]);
  });

  it("rejects a pixel buffer of the wrong size and bad dimensions", () => {
    expect(() =>
      encodePng({ width: 4, height: 4, channels: 3, pixels: new Uint8Array(47) }),
    ).toThrow(RangeError);
    expect(() =>
      encodePng({ width: 0, height: 4, channels: 3, pixels: new Uint8Array(0) }),
    ).toThrow(RangeError);
  });
});
