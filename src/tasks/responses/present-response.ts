import { storage } from "../../errors/storage-unavailable.js";
import type { ImageStore } from "../../images/image-store.js";
import type { ImageRef, LoggedEvent } from "../core/response-state.js";
import type { TaskRecord } from "../core/task-record.js";
import { PendingImage } from "../view/present-task.js";
import { mayHoldImages, restoreImages } from "./response-images.js";
import { responseObject } from "./response-object.js";

/**
 * JSON text to send, with the images whose markers it holds: each replaced by
 * its base64, streamed from the image store, as the answer is written.
 */
export interface PresentedJson {
  text: string;
  images: PendingImage[];
}

/**
 * Makes kept images' references {@link PendingImage}s, for images of
 * response `responseId` only (a key under another task's folder is never
 * read), and lists those it made.
 */
function imageOpener(imageStore: Pick<ImageStore, "get">, responseId: string) {
  const images: PendingImage[] = [];
  const open = (ref: ImageRef): PendingImage | null => {
    const { key, bytes } = ref.$image;
    if (key.split("/")[1] !== responseId) return null;
    const image = new PendingImage(bytes, (signal) => storage(() => imageStore.get(key, signal)));
    images.push(image);
    return image;
  };
  return { open, images };
}

/** A background response as `GET /v1/responses/{id}` shows it, its images to be streamed. */
export function presentResponse(
  record: TaskRecord,
  imageStore: Pick<ImageStore, "get">,
): PresentedJson {
  const opener = imageOpener(imageStore, record.id);
  const text = JSON.stringify(restoreImages(responseObject(record), opener.open));
  return { text, images: opener.images };
}

/** A logged event as a stream sends it: with its `sequence_number`, its images to be streamed. */
export function presentEvent(
  event: LoggedEvent,
  responseId: string,
  imageStore: Pick<ImageStore, "get">,
): PresentedJson {
  const numbered = withSequence(event);
  if (!mayHoldImages(event.json)) return { text: numbered, images: [] };
  const opener = imageOpener(imageStore, responseId);
  const restored = restoreImages(JSON.parse(numbered) as Record<string, unknown>, opener.open);
  return { text: JSON.stringify(restored), images: opener.images };
}

/** The event's JSON with its sequence number, as OpenAI's events carry it. */
function withSequence(event: LoggedEvent): string {
  const rest = event.json.slice(1);
  return `{"sequence_number":${event.seq}${rest === "}" ? "" : ","}${rest}`;
}

/** A final event made from the record (its log is gone, or its end came from outside the run). */
export function finalEvent(record: TaskRecord, seq: number): LoggedEvent | undefined {
  const response = responseObject(record);
  const { status } = response;
  if (status !== "completed" && status !== "incomplete" && status !== "failed") return undefined;
  const type = `response.${status}`;
  return { seq, type, json: JSON.stringify({ type, response }) };
}
