import type { ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import type { ImageObject } from "../../images/image-store.js";
import { clientGone } from "../../http/client-gone.js";
import { imageGone, stringifyView, type PendingImage } from "../view/present-task.js";
import { base64Length } from "../../images/base64-length.js";
import { readWhole, sizeMismatch } from "../../images/read-whole.js";

/**
 * A task as some dialect shows it: JSON whose `b64_json` payloads may be
 * {@link PendingImage}s (the native view's `data`, sub2api's `result.data`,
 * partial images).
 */
export interface ShownView {
  id: string;
}

/** Writes, and waits for the socket to drain when it is full; rejects when the client left. */
function write(res: ServerResponse, chunk: string | Buffer): Promise<void> {
  if (res.destroyed) return Promise.reject(new Error("the client went away"));
  if (res.write(chunk)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      res.off("drain", drained);
      res.off("close", closed);
      if (err) reject(err);
      else resolve();
    };
    const drained = () => done();
    const closed = () => done(new Error("the client went away"));
    res.on("drain", drained);
    res.on("close", closed);
  });
}

/** Streams an image's bytes as base64, three bytes at a time carried across chunks. */
async function writeBase64(res: ServerResponse, body: Readable, size: number): Promise<void> {
  let carry: Buffer | undefined;
  let seen = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    seen += chunk.byteLength;
    if (seen > size) break;
    const all = carry ? Buffer.concat([carry, chunk]) : chunk;
    const whole = all.byteLength - (all.byteLength % 3);
    carry = whole < all.byteLength ? Buffer.from(all.subarray(whole)) : undefined;
    if (whole > 0) await write(res, all.toString("base64", 0, whole));
  }
  if (seen !== size) {
    body.destroy();
    throw sizeMismatch(seen, size);
  }
  if (carry) await write(res, carry.toString("base64"));
}

/** A view's JSON in pieces: the text around its `b64_json` payloads, and those payloads. */
export interface SplitView {
  /**
   * `parts[i]` comes before `images[i]`; the last part after the last image.
   * Text, not bytes: an answer sent in one write goes out with its headers as
   * one string (one `write`, where a buffer costs a `writev` of two).
   */
  parts: string[];
  images: PendingImage[];
  /** Bytes of the whole JSON, base64 included. */
  length: number;
}

/** Bytes of a split view's JSON: its text parts in UTF-8 and its images in base64. */
export function splitLength(parts: readonly string[], images: readonly PendingImage[]): number {
  let length = 0;
  for (const part of parts) length += Buffer.byteLength(part);
  for (const image of images) length += base64Length(image.size);
  return length;
}

/** Cuts the view's JSON at its `b64_json` markers. */
export function splitView(view: ShownView): SplitView {
  const { text, images } = stringifyView(view);
  if (images.length === 0) return { parts: [text], images, length: Buffer.byteLength(text) };
  const parts: string[] = [];
  let from = 0;
  for (const image of images) {
    // Markers are unique and random: the first one from here is the one written here.
    const at = text.indexOf(image.marker, from);
    parts.push(text.slice(from, at));
    from = at + image.marker.length;
  }
  parts.push(text.slice(from));
  return { parts, images, length: splitLength(parts, images) };
}

/**
 * Opens the first image of a split view, before anything is written: an
 * image store that is away rejects (503), bytes already gone are a 404.
 */
export async function openFirstImage(
  view: ShownView,
  split: SplitView,
  signal: AbortSignal,
): Promise<ImageObject | undefined> {
  if (split.images.length === 0) return undefined;
  const first = await split.images[0]!.open(signal);
  if (!first) throw imageGone(view.id);
  return first;
}

/**
 * Writes a split view's JSON, each image's base64 streamed from the image
 * store, one image at a time (`first` opened already); does not end `res`.
 * Rejects when an image cannot be read or the client leaves: the caller
 * cuts the connection, the only way left to tell the client.
 */
export async function writeSplitView(
  res: ServerResponse,
  split: SplitView,
  first: ImageObject | undefined,
  signal: AbortSignal,
): Promise<void> {
  let next = first;
  try {
    for (const [index, image] of split.images.entries()) {
      await write(res, split.parts[index]!);
      next ??= await image.open(signal);
      if (!next) throw new Error("an image was deleted while its task was being sent");
      const { body } = next;
      next = undefined;
      try {
        await writeBase64(res, body, image.size);
      } finally {
        body.destroy();
      }
    }
    await write(res, split.parts.at(-1)!);
  } finally {
    next?.body.destroy();
  }
}

/**
 * An answer up to this size is sent in one write, its images read whole
 * first: most polls of small images cost a third less than writing the
 * pieces one by one, and nothing is held that a stream would not hold.
 */
const ONE_WRITE_BYTES = 64 * 1024;

/**
 * A small split view's whole JSON as one string, every image read before
 * anything is written: an image gone meanwhile is a clean 404 rather than a
 * cut answer. No client-gone signal: reading 64 KiB at most for a client
 * that left costs less than the signal costs every poll.
 */
async function joinSplitView(view: ShownView, split: SplitView): Promise<string> {
  let text = "";
  for (const [index, image] of split.images.entries()) {
    const object = await image.open();
    if (!object) throw imageGone(view.id);
    text += split.parts[index]!;
    text += (await readWhole(object, image.size)).toString("base64");
  }
  return text + split.parts.at(-1)!;
}

/**
 * Sends a task view as JSON with `Content-Length`. `b64_json` payloads are
 * streamed from the image store, base64-encoded on the way, one image at a
 * time: a poll holds a few chunks of an image, never the answer (a task of
 * ten 32 MiB images is 427 MiB of JSON). The first image is opened before
 * anything is written, so an image store that is away is a clean 503 and
 * bytes already gone a clean 404; a failure after that cuts the connection,
 * which the client sees as a short body (`Content-Length`), never as a
 * complete but wrong answer. Headers set on `res` before the call are kept.
 * `sent` hears an answer sent whole in one write (its JSON), as it goes out.
 */
export async function sendTaskView(
  res: ServerResponse,
  status: number,
  view: ShownView,
  sent?: (body: string) => void,
): Promise<void> {
  const split = splitView(view);
  const headers = { "Content-Type": "application/json; charset=utf-8" };
  if (split.images.length === 0) {
    res.writeHead(status, { ...headers, "Content-Length": split.length });
    res.end(split.parts[0]);
    sent?.(split.parts[0]!);
    return;
  }
  const head = res.req?.method === "HEAD";
  if (!head && split.length <= ONE_WRITE_BYTES) {
    const body = await joinSplitView(view, split);
    res.writeHead(status, { ...headers, "Content-Length": split.length });
    res.end(body);
    sent?.(body);
    return;
  }
  const signal = clientGone(res);
  const first = await openFirstImage(view, split, signal);
  if (head) {
    first?.body.destroy();
    res.writeHead(status, { ...headers, "Content-Length": split.length });
    res.end();
    return;
  }
  res.writeHead(status, { ...headers, "Content-Length": split.length });
  try {
    await writeSplitView(res, split, first, signal);
    res.end();
  } catch (err) {
    // Headers are out: the short body is how the client learns the answer broke.
    res.destroy(err as Error);
  }
}
