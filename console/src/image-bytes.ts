import type { Api } from "./api.js";
import { imageSource } from "./format.js";
import type { Task, TaskImage } from "./task-types.js";

/** The bytes of base64 text. */
export function base64Bytes(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/**
 * An image of a task as a `Blob` of its type: decoded from its base64, or
 * fetched from its link (signed: no key is sent with it, nor a cookie or a
 * referrer).
 */
export async function imageBlob(image: TaskImage, signal?: AbortSignal): Promise<Blob> {
  const source = imageSource(image);
  if (!source) throw new Error("This image is not in the answer.");
  if (image.b64_json) {
    const type = /^data:([^;]+);/.exec(source)?.[1] ?? "image/png";
    return new Blob([base64Bytes(image.b64_json)], { type });
  }
  const response = await fetch(source, {
    credentials: "omit",
    referrerPolicy: "no-referrer",
    ...(signal ? { signal } : {}),
  });
  if (!response.ok) throw new Error(`The image could not be read (${response.status}).`);
  return response.blob();
}

/**
 * The task's images with links this page may fetch: its CSP lets it fetch
 * its own origin only (`connect-src 'self'`), so when a link points
 * elsewhere (presigned S3 links, a CDN) the task is read again with the
 * service's own links. Base64 images need no fetch.
 */
export async function fetchableImages(api: Api, task: Task): Promise<TaskImage[]> {
  const images = task.data ?? [];
  const elsewhere = images.some(
    (image) => image.url && new URL(image.url, location.href).origin !== location.origin,
  );
  if (!elsewhere) return images;
  return (await api.get(task.id, undefined, "service")).data ?? [];
}
