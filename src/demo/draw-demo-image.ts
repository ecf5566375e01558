import { createHash } from "node:crypto";
import type { RawImage } from "./png-encoder.js";

/** Width and height of a picture in pixels. */
export interface ImageSize {
  width: number;
  height: number;
}

/** Smallest and largest side the demo draws; keeps a typo like "99999x99999" from eating memory. */
export const MIN_DEMO_SIDE = 16;
export const MAX_DEMO_SIDE = 2048;
const DEFAULT_SIZE: ImageSize = { width: 1024, height: 1024 };

/**
 * Reads an OpenAI `size` value for the demo channel. Absent or `"auto"` mean 1024x1024 as for
 * gpt-image models; `"WIDTHxHEIGHT"` is honoured with each side clamped to 16..2048, so any
 * size a client asks for gets a picture of a predictable shape.
 *
 * @returns `undefined` when the value is neither `auto` nor `WIDTHxHEIGHT`, so the caller can
 *   answer with an `invalid_value` error.
 */
export function parseDemoImageSize(size: unknown): ImageSize | undefined {
  if (size === undefined || size === null || size === "auto") return { ...DEFAULT_SIZE };
  if (typeof size !== "string") return undefined;
  const match = /^(\d{1,6})x(\d{1,6})$/.exec(size.trim());
  if (!match) return undefined;
  return { width: clampSide(Number(match[1])), height: clampSide(Number(match[2])) };
}

function clampSide(side: number): number {
  return Math.min(MAX_DEMO_SIDE, Math.max(MIN_DEMO_SIDE, side));
}

type Rgb = [number, number, number];

/**
 * Draws a deterministic picture for a prompt: a diagonal two-colour gradient, soft stripes and a
 * few translucent discs, all placed and coloured from a SHA-256 of the prompt. The same prompt
 * and variant always give the same pixels, different prompts visibly different pictures, so a
 * demo user can tell their images apart without any model behind the service.
 *
 * @param variant distinguishes the `n` images of one request.
 */
export function drawDemoImage(prompt: string, size: ImageSize, variant = 0): RawImage {
  const { width, height } = size;
  const seed = createHash("sha256").update(`${variant}\u0000${prompt}`).digest();
  const random = seededRandom(seed.readUInt32BE(0) ^ seed.readUInt32BE(4));

  const hue = random() * 360;
  const from = hslToRgb(hue, 0.65, 0.35 + random() * 0.2);
  const to = hslToRgb((hue + 90 + random() * 180) % 360, 0.7, 0.55 + random() * 0.2);
  const pixels = new Uint8Array(width * height * 3);
  fillBackground(pixels, width, height, from, to, 4 + Math.floor(random() * 12), random());

  const discs = 3 + Math.floor(random() * 4);
  const shortSide = Math.min(width, height);
  for (let i = 0; i < discs; i++) {
    const colour = hslToRgb((hue + 40 + random() * 280) % 360, 0.75, 0.5 + random() * 0.3);
    fillDisc(pixels, width, height, {
      cx: random() * width,
      cy: random() * height,
      radius: shortSide * (0.08 + random() * 0.25),
      colour,
      alpha: 0.45 + random() * 0.45,
    });
  }
  return { width, height, channels: 3, pixels };
}

/** Diagonal gradient from `from` (top left) to `to` (bottom right), brightened by soft stripes. */
function fillBackground(
  pixels: Uint8Array,
  width: number,
  height: number,
  from: Rgb,
  to: Rgb,
  stripes: number,
  phase: number,
): void {
  const span = Math.max(1, width + height - 2);
  // One lookup entry per diagonal position keeps the per-pixel work to three copies.
  const lut = new Uint8Array((span + 1) * 3);
  for (let d = 0; d <= span; d++) {
    const t = d / span;
    const wave = 0.88 + 0.12 * Math.sin((t * stripes + phase) * 2 * Math.PI);
    for (let c = 0; c < 3; c++) {
      lut[d * 3 + c] = clampByte((from[c]! + (to[c]! - from[c]!) * t) * wave);
    }
  }
  let p = 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const d = (x + y) * 3;
      pixels[p++] = lut[d]!;
      pixels[p++] = lut[d + 1]!;
      pixels[p++] = lut[d + 2]!;
    }
  }
}

interface Disc {
  cx: number;
  cy: number;
  radius: number;
  colour: Rgb;
  alpha: number;
}

/** Blends a disc over the picture, fading its last pixel of radius for a smooth edge. */
function fillDisc(pixels: Uint8Array, width: number, height: number, disc: Disc): void {
  const { cx, cy, radius, colour, alpha } = disc;
  const y0 = Math.max(0, Math.floor(cy - radius));
  const y1 = Math.min(height - 1, Math.ceil(cy + radius));
  for (let y = y0; y <= y1; y++) {
    const dy = y + 0.5 - cy;
    const half = Math.sqrt(Math.max(0, radius * radius - dy * dy));
    const x0 = Math.max(0, Math.floor(cx - half));
    const x1 = Math.min(width - 1, Math.ceil(cx + half));
    for (let x = x0; x <= x1; x++) {
      const dx = x + 0.5 - cx;
      const edge = radius - Math.sqrt(dx * dx + dy * dy);
      if (edge <= 0) continue;
      const a = alpha * Math.min(1, edge);
      const p = (y * width + x) * 3;
      for (let c = 0; c < 3; c++) {
        pixels[p + c] = clampByte(pixels[p + c]! * (1 - a) + colour[c]! * a);
      }
    }
  }
}

/** mulberry32: tiny, fast and good enough to place shapes reproducibly. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function hslToRgb(hue: number, saturation: number, lightness: number): Rgb {
  const chroma = (1 - Math.abs(2 * lightness - 1)) * saturation;
  const h = hue / 60;
  const x = chroma * (1 - Math.abs((h % 2) - 1));
  const m = lightness - chroma / 2;
  const [r, g, b]: Rgb =
    h < 1
      ? [chroma, x, 0]
      : h < 2
        ? [x, chroma, 0]
        : h < 3
          ? [0, chroma, x]
          : h < 4
            ? [0, x, chroma]
            : h < 5
              ? [x, 0, chroma]
              : [chroma, 0, x];
  return [clampByte((r + m) * 255), clampByte((g + m) * 255), clampByte((b + m) * 255)];
}

function clampByte(value: number): number {
  return value <= 0 ? 0 : value >= 255 ? 255 : Math.round(value);
}
