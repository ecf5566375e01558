import { inflateSync } from "node:zlib";

/** One PNG chunk as found in the file, with whether its stored CRC matches its contents. */
export interface InspectedChunk {
  type: string;
  data: Buffer;
  crcValid: boolean;
}

/** What the tests need to know about a PNG, decoded without using the code under test. */
export interface InspectedPng {
  width: number;
  height: number;
  bitDepth: number;
  colorType: number;
  chunks: InspectedChunk[];
  /** The inflated IDAT stream: one filter byte then the samples, for every row. */
  scanlines: Buffer;
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

/** Reference CRC-32 (PNG spec, annex D), independent of node:zlib's. */
export function referenceCrc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const byte of bytes) c = CRC_TABLE[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/**
 * Parses a PNG strictly enough that a broken encoder fails the tests: signature, chunk layout
 * up to IEND with nothing after it, and the IHDR fields. Throws on structural errors.
 */
export function inspectPng(png: Buffer): InspectedPng {
  if (!png.subarray(0, 8).equals(SIGNATURE)) throw new Error("bad PNG signature");
  const chunks: InspectedChunk[] = [];
  let offset = 8;
  while (offset < png.length) {
    if (offset + 12 > png.length) throw new Error(`truncated chunk at ${offset}`);
    const length = png.readUInt32BE(offset);
    const typeAndData = png.subarray(offset + 4, offset + 8 + length);
    if (typeAndData.length !== length + 4) throw new Error(`truncated chunk data at ${offset}`);
    const type = typeAndData.subarray(0, 4).toString("latin1");
    const storedCrc = png.readUInt32BE(offset + 8 + length);
    chunks.push({
      type,
      data: Buffer.from(typeAndData.subarray(4)),
      crcValid: storedCrc === referenceCrc32(typeAndData),
    });
    offset += 12 + length;
    if (type === "IEND") break;
  }
  if (offset !== png.length) throw new Error("bytes after IEND, or IEND missing");
  const ihdr = chunks[0];
  if (ihdr?.type !== "IHDR" || ihdr.data.length !== 13) throw new Error("first chunk is not IHDR");
  const idat = Buffer.concat(chunks.filter((c) => c.type === "IDAT").map((c) => c.data));
  return {
    width: ihdr.data.readUInt32BE(0),
    height: ihdr.data.readUInt32BE(4),
    bitDepth: ihdr.data[8]!,
    colorType: ihdr.data[9]!,
    chunks,
    scanlines: inflateSync(idat),
  };
}
