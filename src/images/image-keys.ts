import { extensionOf, imageTypeFromPath } from "./image-type.js";

/** One path segment of a key: no `/`, not `.` or `..`, nothing a file system or URL reads specially. */
const SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$/;
const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

/**
 * Refuses a key that could leave the store's root or read differently in a
 * URL, a file path or an S3 key; every backend checks keys with it.
 */
export function checkKey(key: string): string {
  const segments = key.split("/");
  if (segments.length > 8 || !segments.every((segment) => SEGMENT.test(segment))) {
    throw new Error(`not an image store key: ${JSON.stringify(key.slice(0, 200))}`);
  }
  return key;
}

/** `YYYY-MM-DD` (UTC) of a Unix time in seconds. */
export function dayOf(unixSec: number): string {
  return new Date(unixSec * 1000).toISOString().slice(0, 10);
}

/** The expiry day a key starts with, or undefined for a key that does not start with one. */
export function dayOfKey(key: string): string | undefined {
  const first = key.slice(0, key.indexOf("/"));
  return DAY.test(first) ? first : undefined;
}

/**
 * Image `index` of a task's result: `<expiry day>/<task id>/<n>.<ext>`. The
 * day is the one the task expires on, so a whole day's folder can go once
 * the day is over (and a bucket lifecycle rule on age can back that up). A
 * run after the first (`attempt` 2 and up: the task was run again after a
 * replica died) writes `<n>.run<attempt>.<ext>`, so a run that lost the task
 * never overwrites or deletes the images of the run that has it now.
 */
export function resultKey(
  expiresAtSec: number,
  taskId: string,
  index: number,
  mime: string,
  attempt = 1,
): string {
  const run = attempt > 1 ? `.run${attempt}` : "";
  return checkKey(`${dayOf(expiresAtSec)}/${taskId}/${index}${run}.${extensionOf(mime)}`);
}

/**
 * Partial image `index` of a task's run `attempt`, kept with the task:
 * `<day>/<task id>/partial-<n>[.run<attempt>].<ext>`, the day the last its
 * task can expire on.
 */
export function partialKey(
  untilSec: number,
  taskId: string,
  index: number,
  mime: string,
  attempt = 1,
): string {
  const run = attempt > 1 ? `.run${attempt}` : "";
  return checkKey(`${dayOf(untilSec)}/${taskId}/partial-${index}${run}.${extensionOf(mime)}`);
}

/** An edit's input image `index`, kept until its task finishes: `<day>/<task id>/input-<n>.<ext>`. */
export function inputKey(untilSec: number, taskId: string, index: number, mime: string): string {
  return checkKey(`${dayOf(untilSec)}/${taskId}/input-${index}.${extensionOf(mime)}`);
}

/** The content type of a key the service wrote, from its extension. */
export function contentTypeOfKey(key: string): string {
  return imageTypeFromPath(key)?.mimeType ?? "application/octet-stream";
}
