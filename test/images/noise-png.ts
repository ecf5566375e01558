import { randomBytes } from "node:crypto";
import { encodePng } from "../../src/demo/png-encoder.js";

/**
 * A PNG of random pixels: incompressible, so `size` 1024 weighs what a
 * gpt-image answer does (about 3 MB), whatever the encoder does.
 */
export function noisePng(size = 1024): Buffer {
  return encodePng(
    { width: size, height: size, channels: 3, pixels: randomBytes(size * size * 3) },
    0,
  );
}

/** A channel's `/images/generations` answer of these images, as JSON text. */
export function imagesAnswer(images: readonly Buffer[]): string {
  return JSON.stringify({
    created: Math.floor(Date.now() / 1000),
    data: images.map((image) => ({ b64_json: image.toString("base64") })),
  });
}
