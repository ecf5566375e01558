import { createClient } from "@keyv/redis";
import Database from "better-sqlite3";
import type { Config } from "../../src/config/config-schema.js";
import { createImageBlobWriter } from "../../src/tasks/legacy/sqlite-image-blobs.js";

/*
 * Image bytes written into the task store the way releases before the image
 * store wrote them, for the tests of the upgrade step: a SQLite file's
 * `image_blobs` table, or Redis entries beside the record (Keyv's
 * `{"value": <base64>, "expires": <ms>}`, under the key those releases wrote,
 * spelled here as they did).
 */

/** What one call of {@link writeLegacyBytes} writes: result image or edit input `index` of task `id`. */
export interface LegacyBytes {
  kind: "image" | "input";
  id: string;
  index: number;
  bytes: Buffer;
}

/**
 * Writes `written` as an earlier release did, into the store `config` names, which no process
 * holds at the time (a SQLite file is opened on a connection of its own).
 */
export async function writeLegacyBytes(
  config: Config,
  written: LegacyBytes[],
  ttlMs: number,
): Promise<void> {
  const expiresMs = Date.now() + ttlMs;
  const deployment = config.deployment.taskStore;
  if (deployment.kind === "sqlite") {
    const db = new Database(deployment.file);
    try {
      const write = createImageBlobWriter(db);
      for (const { kind, id, index, bytes } of written) write(kind, id, index, bytes, expiresMs);
    } finally {
      db.close();
    }
    return;
  }
  if (deployment.kind !== "redis") throw new Error("the memory store never held such bytes");
  const client = createClient({ url: deployment.url });
  await client.connect();
  try {
    for (const { kind, id, index, bytes } of written) {
      const key = `${config.store.prefix}::${kind}:${id}:${index}`;
      const entry = JSON.stringify({ value: bytes.toString("base64"), expires: expiresMs });
      await client.set(key, entry, { expiration: { type: "PX", value: ttlMs } });
    }
  } finally {
    await client.close();
  }
}
