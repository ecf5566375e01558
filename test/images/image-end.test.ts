import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { encodePng } from "../../src/demo/png-encoder.js";
import { ImageEnd } from "../../src/images/image-end.js";
import { noisePng } from "./noise-png.js";

const fixture = (name: string) =>
  readFileSync(new URL(`../fixtures/images/${name}`, import.meta.url));

/** Where the image in `bytes` ends, fed in chunks of `size` bytes: an index in `bytes`, or -1. */
function endOf(bytes: Buffer, size: number): number {
  const end = new ImageEnd();
  for (let at = 0; at < bytes.length; at += size) {
    const found = end.push(bytes.subarray(at, at + size));
    if (found !== -1) return at + found;
  }
  return -1;
}

/** A JPEG with `inner` (another whole JPEG, its EOI included) in an APP1 segment, as EXIF keeps a thumbnail. */
function withThumbnail(jpeg: Buffer, inner: Buffer): Buffer {
  const payload = Buffer.concat([Buffer.from("Exif\0\0"), inner]);
  const header = Buffer.from([0xff, 0xe1, 0, 0]);
  header.writeUInt16BE(payload.length + 2, 2);
  return Buffer.concat([jpeg.subarray(0, 2), header, payload, jpeg.subarray(2)]);
}

const baseline = fixture("baseline.jpeg");
const images: [string, Buffer][] = [
  ["a small PNG", encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12) })],
  ["a noise PNG", noisePng(64)],
  ["a baseline JPEG", baseline],
  ["a progressive JPEG (ten scans)", fixture("progressive.jpeg")],
  ["a JPEG with restart markers", fixture("restarts.jpeg")],
  ["a JPEG with a thumbnail (and its EOI) in APP1", withThumbnail(baseline, baseline)],
  ["a lossy WebP", fixture("lossy.webp")],
  ["a lossless WebP", fixture("lossless.webp")],
];

describe("finding where a downloaded image ends", () => {
  it("finds each image's last byte, whatever the chunk size, with anything after it", () => {
    const after = Buffer.concat([Buffer.from([0xff, 0xd9]), Buffer.from("IEND junk")]);
    for (const [name, image] of images) {
      for (const size of [1, 2, 3, 5, 64, 4096, image.length]) {
        expect(endOf(Buffer.concat([image, after]), size), `${name} / ${size}`).toBe(image.length);
      }
    }
  });

  it("finds none in an image cut short, at any byte", () => {
    for (const [name, image] of images) {
      for (let cut = 0; cut < image.length; cut += Math.max(1, Math.floor(image.length / 97))) {
        expect(endOf(image.subarray(0, cut), 7), `${name} cut at ${cut}`).toBe(-1);
      }
      expect(endOf(image.subarray(0, image.length - 1), 1), `${name} less its last byte`).toBe(-1);
    }
  });

  it("finds none in what it cannot follow: other formats, broken structure", () => {
    const broken = Buffer.from(baseline);
    // The byte where the second segment's marker belongs.
    broken[4 + broken.readUInt16BE(4)] = 0x12;
    const texts = [
      Buffer.from('{"error":"not an image"}'),
      Buffer.from("GIF89a\x01\x00\x01\x00"),
      Buffer.concat([Buffer.from("RIFF\x02\x00\x00\x00WEBP"), Buffer.alloc(64)]),
      Buffer.concat([noisePng(8).subarray(0, 8), Buffer.from([0xff, 0xff, 0xff, 0xff])]),
      broken,
    ];
    for (const text of texts) expect(endOf(text, 3), text.toString("latin1", 0, 12)).toBe(-1);
  });
});
