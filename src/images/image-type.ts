/**
 * The image formats the service keeps and serves and the MCP server saves:
 * what gpt-image models produce. One module, so the two never disagree.
 */
export interface ImageType {
  mimeType: "image/png" | "image/jpeg" | "image/webp";
  ext: "png" | "jpeg" | "webp";
}

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/**
 * Reads the format from the bytes themselves, so that whatever a channel, a server or a
 * Content-Type claims, only real PNG, JPEG or WebP images are kept, served or written to disk.
 */
export function sniffImageType(bytes: Uint8Array): ImageType | undefined {
  if (PNG_SIGNATURE.every((byte, i) => bytes[i] === byte)) {
    return { mimeType: "image/png", ext: "png" };
  }
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) {
    return { mimeType: "image/jpeg", ext: "jpeg" };
  }
  if (ascii(bytes, 0, 4) === "RIFF" && ascii(bytes, 8, 12) === "WEBP") {
    return { mimeType: "image/webp", ext: "webp" };
  }
  return undefined;
}

/**
 * Guesses the type from a URL's file extension, for links that are handed out without being
 * fetched (the service names its image URLs `{index}.{ext}`).
 */
export function imageTypeFromPath(pathname: string): ImageType | undefined {
  const ext = /\.([A-Za-z0-9]+)$/.exec(pathname)?.[1]?.toLowerCase();
  switch (ext) {
    case "png":
      return { mimeType: "image/png", ext: "png" };
    case "jpg":
    case "jpeg":
      return { mimeType: "image/jpeg", ext: "jpeg" };
    case "webp":
      return { mimeType: "image/webp", ext: "webp" };
    default:
      return undefined;
  }
}

function ascii(bytes: Uint8Array, start: number, end: number): string {
  return String.fromCharCode(...bytes.subarray(start, end));
}

/** File extension for a MIME type this module produced. */
export function extensionOf(mime: string): string {
  return mime.split("/")[1] ?? "bin";
}
