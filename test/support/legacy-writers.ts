import { createClient } from "@keyv/redis";
import type { Config } from "../../src/config/config-schema.js";
import { createImageBlobWriter } from "../../src/tasks/legacy/sqlite-image-blobs.js";
import type { OpenedTaskStore } from "../../src/tasks/store/create-task-store.js";

/*
 * Image bytes written into the task store the way releases before the image
 * store wrote them, for the tests of the upgrade step: a SQLite file's
 * `image_blobs` table, or Redis entries beside the record (Keyv's
 * `{"value": <base64>, "expires": <ms>}`).
 */

/** Writes result image (`image`) or edit input (`input`) `index` of task `id` as an earlier release did. */
export async function writeLegacyBytes(
  config: Config,
  opened: OpenedTaskStore,
  place: { kind: "image" | "input"; id: string; index: number },
  bytes: Buffer,
  ttlMs: number,
): Promise<void> {
  const expiresMs = Date.now() + ttlMs;
  if (opened.sqlite) {
    createImageBlobWriter(opened.sqlite)(place.kind, place.id, place.index, bytes, expiresMs);
    return;
  }
  const deployment = config.deployment.taskStore;
  if (deployment.kind !== "redis") throw new Error("the memory store never held such bytes");
  const client = createClient({ url: deployment.url });
  await client.connect();
  try {
    const key = `${config.store.prefix}::${place.kind}:${place.id}:${place.index}`;
    const entry = JSON.stringify({ value: bytes.toString("base64"), expires: expiresMs });
    await client.set(key, entry, { expiration: { type: "PX", value: ttlMs } });
  } finally {
    await client.close();
  }
}
