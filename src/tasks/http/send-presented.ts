import type { ServerResponse } from "node:http";
import { clientGone } from "../../http/client-gone.js";
import type { ServiceError } from "../../errors/service-error.js";
import type { PresentedJson } from "../responses/present-response.js";
import type { PendingImage } from "../view/present-task.js";
import { splitLength, writeSplitView, type SplitView } from "./send-task-view.js";

/** Cuts JSON text at the markers of its pending images (each found once). */
export function splitPresented({ text, images }: PresentedJson): SplitView {
  const parts: string[] = [];
  const found: PendingImage[] = [];
  let from = 0;
  const byMarker = new Map(images.map((image) => [image.marker, image]));
  for (const match of text.matchAll(/__b64_[0-9a-f]{24}_\d+__/g)) {
    const image = byMarker.get(match[0]);
    if (!image) continue;
    parts.push(text.slice(from, match.index));
    found.push(image);
    from = match.index + match[0].length;
  }
  parts.push(text.slice(from));
  return { parts, images: found, length: splitLength(parts, found) };
}

/**
 * Sends presented JSON with `Content-Length`, each image's base64 streamed
 * from the image store as `GET` of an image task sends it: the first image
 * opened before anything is written (an image store that is away is a clean
 * 503, an image gone `gone()`), a failure after that cuts the connection.
 */
export async function sendPresented(
  res: ServerResponse,
  status: number,
  presented: PresentedJson,
  gone: () => ServiceError,
): Promise<void> {
  const split = splitPresented(presented);
  const headers = {
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": split.length,
  };
  if (split.images.length === 0) {
    res.writeHead(status, headers);
    res.end(split.parts[0]);
    return;
  }
  const signal = clientGone(res);
  const first = await split.images[0]!.open(signal);
  if (!first) throw gone();
  res.writeHead(status, headers);
  if (res.req?.method === "HEAD") {
    first.body.destroy();
    res.end();
    return;
  }
  try {
    await writeSplitView(res, split, first, signal);
    res.end();
  } catch (err) {
    // Headers are out: the short body is how the client learns the answer broke.
    res.destroy(err as Error);
  }
}

/**
 * Writes one server-sent event: `event: <type>` and its JSON on one `data:`
 * line, its images' base64 streamed from the image store. A failure once the
 * event is begun cuts the connection: a client never takes half an event
 * for a whole one.
 */
export async function writeEvent(
  res: ServerResponse,
  type: string,
  presented: PresentedJson,
  signal: AbortSignal,
): Promise<void> {
  const split = splitPresented(presented);
  if (split.images.length === 0) {
    res.write(`event: ${type}\ndata: ${presented.text}\n\n`);
    return;
  }
  const first = await split.images[0]!.open(signal);
  res.write(`event: ${type}\ndata: `);
  try {
    if (!first) throw new Error("an image of the event is no longer stored");
    await writeSplitView(res, split, first, signal);
  } catch (err) {
    res.destroy();
    throw err;
  }
  res.write("\n\n");
}
