import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { createStaticKeyLookup } from "../../src/auth/static-keys.js";
import { openTaskBackend } from "../../src/tasks/open-task-backend.js";
import { newTaskId, type TaskImage, type TaskRecord } from "../../src/tasks/core/task-record.js";
import { writeLegacyBytes } from "../support/legacy-writers.js";
import { deleteKeys, uniquePrefix } from "../support/redis.js";
import { TEST_KEYS, testConfig, type TestAppOptions } from "../support/start-test-app.js";
import { getTask, useApp, useTempDir } from "../tasks/task-api.js";

/*
 * Tasks finished before the image store kept their bytes inside the task
 * store. An upgraded service still answers them: b64_json and links alike.
 */

const PLACES: Array<{ name: string; options: () => Promise<TestAppOptions> }> = [
  {
    name: "sqlite",
    options: async () => ({ storeUrl: `sqlite://${join(await useTempDir(), "old.db")}` }),
  },
  {
    name: "redis",
    options: async () => {
      const prefix = uniquePrefix("legacy");
      onTestFinished(() => deleteKeys(prefix).then(() => undefined));
      return { redis: { prefix } };
    },
  },
];

/** Writes a finished task the way the service did before the image store. */
async function writeOldTask(
  options: TestAppOptions,
  format: "url" | "b64_json",
  bytes: Buffer,
): Promise<string> {
  const config = testConfig("http://127.0.0.1:9/v1", options);
  const backend = await openTaskBackend(config, pino({ level: "silent" }));
  const { store } = backend;
  const owner = createStaticKeyLookup(config.auth.keys)(TEST_KEYS.default)!.subject;
  const nowSec = Math.floor(Date.now() / 1000);
  const record: TaskRecord = {
    id: newTaskId(),
    owner,
    status: "queued",
    model: "gpt-image-1",
    request: { prompt: "from before" },
    responseFormat: format,
    created: nowSec,
    attempts: 0,
  };
  try {
    await store.create(record);
    await store.transition(record.id, "queued", {
      status: "in_progress",
      started_at: nowSec,
      attempts: 1,
    });
    await store.transition(
      record.id,
      "in_progress",
      {
        status: "completed",
        completed_at: nowSec,
        expires_at: nowSec + 3600,
        // From before the image store: no key, the bytes are in the task store.
        images: [{ mime: "image/png", bytes: bytes.length } as TaskImage],
      },
      { ttlMs: 3600_000 },
    );
  } finally {
    await backend.close();
  }
  await writeLegacyBytes(config, [{ kind: "image", id: record.id, index: 0, bytes }], 3600_000);
  return record.id;
}

const png = () =>
  Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), randomBytes(5000)]);

describe.each(PLACES)("records from before the image store ($name)", ({ options }) => {
  it("still answer b64_json and their links, byte for byte", async () => {
    const place = await options();
    const b64Bytes = png();
    const urlBytes = png();
    const b64Task = await writeOldTask(place, "b64_json", b64Bytes);
    const urlTask = await writeOldTask(place, "url", urlBytes);

    const app = await useApp(place);
    const b64 = await getTask(app, b64Task);
    expect(b64.status, b64.text).toBe(200);
    expect(Number(b64.headers.get("content-length"))).toBe(Buffer.byteLength(b64.text));
    expect(Buffer.from(b64.body.data![0]!.b64_json!, "base64").equals(b64Bytes)).toBe(true);

    const url = await getTask(app, urlTask);
    const link = url.body.data![0]!.url!;
    const image = await fetch(link);
    expect(image.status).toBe(200);
    expect(image.headers.get("content-type")).toBe("image/png");
    expect(image.headers.get("etag")).toMatch(/^"[^"]+"$/);
    expect(Buffer.from(await image.arrayBuffer()).equals(urlBytes)).toBe(true);
  });
});
