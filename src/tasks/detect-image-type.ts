/** The MIME type and file extension of image bytes, from their magic numbers. */
export function detectImageType(bytes: Buffer): { mime: string; ext: string } | undefined {
  if (bytes.length >= 8 && bytes.readUInt32BE(0) === 0x89504e47) {
    return { mime: "image/png", ext: "png" };
  }
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) {
    return { mime: "image/jpeg", ext: "jpeg" };
  }
  if (
    bytes.length >= 12 &&
    bytes.toString("latin1", 0, 4) === "RIFF" &&
    bytes.toString("latin1", 8, 12) === "WEBP"
  ) {
    return { mime: "image/webp", ext: "webp" };
  }
  if (bytes.length >= 6 && bytes.toString("latin1", 0, 4) === "GIF8") {
    return { mime: "image/gif", ext: "gif" };
  }
  return undefined;
}

/** File extension for a MIME type we serve. */
export function extensionOf(mime: string): string {
  return mime.split("/")[1] ?? "bin";
}
