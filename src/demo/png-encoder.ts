import { crc32, deflateSync } from "node:zlib";

/** Raw pixels, row-major, top row first, `channels` bytes per pixel (8 bits per sample). */
export interface RawImage {
  width: number;
  height: number;
  /** 3 for RGB, 4 for RGBA. */
  channels: 3 | 4;
  /** `width * height * channels` bytes. */
  pixels: Uint8Array;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** PNG colour types (PNG spec, table 11.1). */
const COLOR_TYPE_RGB = 2;
const COLOR_TYPE_RGBA = 6;

/**
 * Encodes pixels as a PNG so the demo channel and test fakes can return real, decodable images
 * without an image library.
 *
 * Every scanline uses filter type 0 (none): the pictures we draw are smooth and deflate well
 * without per-row filtering, and skipping the filter search keeps 1024x1024 well under our budget.
 *
 * @param compressionLevel zlib level 0..9; the default 6 matches zlib's own trade-off.
 */
export function encodePng(image: RawImage, compressionLevel = 6): Buffer {
  const { width, height, channels, pixels } = image;
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw new RangeError(`PNG dimensions must be positive integers, got ${width}x${height}`);
  }
  const stride = width * channels;
  if (pixels.length !== stride * height) {
    throw new RangeError(`expected ${stride * height} pixel bytes, got ${pixels.length}`);
  }

  // Each scanline is prefixed by its filter-type byte.
  const raw = Buffer.allocUnsafe((stride + 1) * height);
  for (let y = 0; y < height; y++) {
    const offset = y * (stride + 1);
    raw[offset] = 0;
    raw.set(pixels.subarray(y * stride, (y + 1) * stride), offset + 1);
  }

  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = channels === 4 ? COLOR_TYPE_RGBA : COLOR_TYPE_RGB;
  ihdr[10] = 0; // compression: deflate
  ihdr[11] = 0; // filter method: adaptive (per-row type byte)
  ihdr[12] = 0; // no interlace

  return Buffer.concat([
    PNG_SIGNATURE,
    pngChunk("IHDR", ihdr),
    pngChunk("IDAT", deflateSync(raw, { level: compressionLevel })),
    pngChunk("IEND", Buffer.alloc(0)),
  ]);
}

/** Length, type, data, then a CRC over type and data, as the PNG chunk layout requires. */
function pngChunk(type: string, data: Buffer): Buffer {
  const typeBytes = Buffer.from(type, "latin1");
  const header = Buffer.alloc(8);
  header.writeUInt32BE(data.length, 0);
  typeBytes.copy(header, 4);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(data, crc32(typeBytes)) >>> 0, 0);
  return Buffer.concat([header, data, crc]);
}
