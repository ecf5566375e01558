import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";

/** Why a channel's body could not be used. */
export type BrokenBody = "cut" | "too_large" | "undecodable";

/** Rejection of {@link readChannelBody}. */
export class BrokenBodyError extends Error {
  constructor(readonly reason: BrokenBody) {
    super(`channel body ${reason}`);
    this.name = "BrokenBodyError";
  }
}

/**
 * The channel's answer decoded: it is asked for `identity`, but one that
 * compresses anyway is decoded here, since a body that is scrubbed must be
 * readable. `undefined` for an encoding this service cannot decode.
 */
export function decodedChannelBody(proxyRes: IncomingMessage): Readable | undefined {
  const encoding = String(proxyRes.headers["content-encoding"] ?? "identity")
    .trim()
    .toLowerCase();
  if (encoding === "identity" || encoding === "") return proxyRes;
  const decoder =
    encoding === "gzip" || encoding === "x-gzip"
      ? createGunzip()
      : encoding === "deflate"
        ? createInflate()
        : encoding === "br"
          ? createBrotliDecompress()
          : undefined;
  if (!decoder) return undefined;
  proxyRes.once("error", (err) => decoder.destroy(err));
  proxyRes.once("close", () => {
    if (!proxyRes.complete) decoder.destroy(new Error("channel answer cut off"));
  });
  return proxyRes.pipe(decoder);
}

/**
 * A channel's whole body, decoded, at most `maxBytes`. Rejects with a
 * {@link BrokenBodyError} when it is cut off (a reset, a timeout that
 * destroyed it), larger than `maxBytes` or undecodable.
 */
export function readChannelBody(proxyRes: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const source = decodedChannelBody(proxyRes);
  if (!source) {
    proxyRes.resume();
    return Promise.reject(new BrokenBodyError("undecodable"));
  }
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (err?: BrokenBodyError) => {
      if (settled) return;
      settled = true;
      if (err) {
        proxyRes.destroy();
        reject(err);
        return;
      }
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    };
    source.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) settle(new BrokenBodyError("too_large"));
      else chunks.push(chunk);
    });
    source.once("end", () => settle(proxyRes.complete ? undefined : new BrokenBodyError("cut")));
    source.once("error", () =>
      settle(new BrokenBodyError(source === proxyRes ? "cut" : "undecodable")),
    );
    proxyRes.once("close", () => {
      if (!proxyRes.complete) settle(new BrokenBodyError("cut"));
    });
  });
}
