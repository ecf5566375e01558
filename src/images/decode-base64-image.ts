import { base64Length } from "./base64-length.js";
import { sniffImageType, type ImageType } from "./image-type.js";

/** An image decoded from base64 and checked: its bytes and what they are. */
export interface DecodedImage {
  bytes: Buffer;
  mime: ImageType["mimeType"];
}

/**
 * The image a channel's base64 holds, when it is one the service keeps: at most
 * `maxImageBytes` (a string too long for that is refused before it is decoded)
 * and a PNG, JPEG or WebP by its bytes. Else why not, for the caller's own
 * message: `too_large` or `not_an_image`.
 */
export function decodeBase64Image(
  value: string,
  maxImageBytes: number,
): DecodedImage | "too_large" | "not_an_image" {
  if (value.length > base64Length(maxImageBytes) + 4) return "too_large";
  const bytes = Buffer.from(value, "base64");
  if (bytes.byteLength > maxImageBytes) return "too_large";
  const type = sniffImageType(bytes);
  return type ? { bytes, mime: type.mimeType } : "not_an_image";
}
