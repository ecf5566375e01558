import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { text } from "node:stream/consumers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allocPageAligned } from "../../src/fs/page-aligned-buffer.js";
import { createFileImageStore } from "../../src/images/file-image-store.js";
import { dayOf } from "../../src/images/image-keys.js";
import type { ImageStore } from "../../src/images/image-store.js";
import { createMemoryImageStore } from "../../src/images/memory-image-store.js";
import { openS3ImageStore } from "../../src/images/s3-image-store.js";
import { sweepExpiredImages } from "../../src/images/sweep-expired-images.js";
import { S3_CREDENTIALS, startS3Server, type TestS3Server } from "../support/s3-server.js";
import { readAll } from "./read-all.js";

/*
 * One suite, every backend: what the task feature relies on from an image
 * store. The S3 backend runs against s3rver, a real S3-protocol server on a
 * free port (path-style, SigV4 checked), not a mock of the SDK.
 */

let s3: TestS3Server;
let dir: string;

beforeAll(async () => {
  s3 = await startS3Server();
  dir = await mkdtemp(join(tmpdir(), "image-store-"));
});
afterAll(async () => {
  await s3?.close();
  await rm(dir, { recursive: true, force: true });
});

const BACKENDS: Array<{ name: string; open: () => Promise<ImageStore> }> = [
  { name: "memory", open: async () => createMemoryImageStore() },
  {
    // A local disk: small files written and read with synchronous calls.
    name: "file",
    open: async () => createFileImageStore({ dir: join(dir, randomBytes(4).toString("hex")) }),
  },
  {
    // As on a network mount: every call through the thread pool.
    name: "file, every call asynchronous",
    open: async () =>
      createFileImageStore({ dir: join(dir, randomBytes(4).toString("hex")), inline: false }),
  },
  {
    name: "s3",
    open: () =>
      openS3ImageStore({
        bucket: s3.bucket,
        prefix: `conformance/${randomBytes(4).toString("hex")}`,
        endpoint: s3.endpoint,
        region: "us-east-1",
        forcePathStyle: true,
        credentials: S3_CREDENTIALS,
      }),
  },
];

/** A key as the service makes them. */
const key = (day: string, task: string, file: string) => `${day}/task_${task}/${file}`;

describe.each(BACKENDS)("image store: $name", ({ open }) => {
  let store: ImageStore;
  beforeAll(async () => {
    store = await open();
  });
  afterAll(async () => {
    await store?.close();
  });

  it("gives back what was put, as a stream with its size, type and a quoted ETag", async () => {
    const bytes = randomBytes(3 * 1024 * 1024 + 17); // a real-size image, not compressible
    const k = key("2030-01-01", "big", "0.png");
    await store.put(k, bytes, "image/png");
    const found = await store.get(k);
    expect(found).toBeDefined();
    expect(found!.size).toBe(bytes.length);
    expect(found!.contentType).toBe("image/png");
    expect(found!.etag).toMatch(/^"[^"]+"$/);
    expect((await readAll(found!.body)).equals(bytes)).toBe(true);
    const again = await store.get(k);
    expect(again!.etag).toBe(found!.etag);
    again!.body.destroy();
  });

  it("gives back an image decoded as a task decodes one (the start of a larger page-aligned buffer)", async () => {
    // The file store writes these past the page cache: whole blocks directly, the rest cached.
    for (const length of [2 * 1024 * 1024, 1024 * 1024 + 4095]) {
      const bytes = allocPageAligned(length + 100_000).subarray(0, length);
      randomBytes(length).copy(bytes);
      const k = key("2030-01-01", `aligned${length}`, "0.png");
      await store.put(k, bytes, "image/png");
      const found = await store.get(k);
      expect(found!.size).toBe(length);
      expect((await readAll(found!.body)).equals(bytes)).toBe(true);
    }
  });

  it("answers undefined for a key that was never written", async () => {
    expect(await store.get(key("2030-01-01", "none", "0.png"))).toBeUndefined();
  });

  it("replaces an object whole, with a new ETag", async () => {
    const k = key("2030-01-01", "over", "0.webp");
    await store.put(k, Buffer.from("first version"), "image/webp");
    const first = await store.get(k);
    await text(first!.body);
    await store.put(k, Buffer.from("second version, longer"), "image/webp");
    const second = await store.get(k);
    expect(await text(second!.body)).toBe("second version, longer");
    expect(second!.etag).not.toBe(first!.etag);
    expect(second!.contentType).toBe("image/webp");
  });

  it("deletes, and takes keys that do not exist", async () => {
    const a = key("2030-01-02", "del", "0.png");
    const b = key("2030-01-02", "del", "1.png");
    await store.put(a, Buffer.from("a"), "image/png");
    await store.put(b, Buffer.from("b"), "image/png");
    await store.delete([a, key("2030-01-02", "del", "9.png")]);
    expect(await store.get(a)).toBeUndefined();
    const kept = await store.get(b);
    expect(await text(kept!.body)).toBe("b");
    await store.delete([b]);
    await store.delete([]);
    expect(await store.get(b)).toBeUndefined();
  });

  it("lists by prefix, in key order, with sizes", async () => {
    const keys = [
      key("2030-02-02", "b", "0.png"),
      key("2030-02-01", "a", "1.png"),
      key("2030-02-01", "a", "0.png"),
      key("2030-02-01", "c", "input-0.jpeg"),
    ];
    for (const [index, k] of keys.entries()) {
      await store.put(k, Buffer.alloc(index + 1), "image/png");
    }
    const listed = [];
    for await (const entry of store.list("2030-02-01/")) listed.push(entry);
    expect(listed).toEqual([
      { key: key("2030-02-01", "a", "0.png"), size: 3 },
      { key: key("2030-02-01", "a", "1.png"), size: 2 },
      { key: key("2030-02-01", "c", "input-0.jpeg"), size: 4 },
    ]);
    const task = [];
    for await (const entry of store.list("2030-02-01/task_a/")) task.push(entry.key);
    expect(task).toEqual([key("2030-02-01", "a", "0.png"), key("2030-02-01", "a", "1.png")]);
    const all = [];
    for await (const entry of store.list("")) all.push(entry.key);
    expect(all).toEqual([...all].sort());
    expect(all).toEqual(expect.arrayContaining(keys));
  });

  it("refuses keys that could leave the store's root or read differently", async () => {
    for (const bad of ["../x.png", "a/../../x.png", "/etc/passwd", "a//b.png", "a/b c.png", ""]) {
      await expect(store.put(bad, Buffer.from("x"), "image/png"), bad).rejects.toThrow(/key/);
      await expect(store.get(bad), bad).rejects.toThrow(/key/);
    }
  });

  it("sweeps whole expiry days that are over, and nothing else", async () => {
    const now = Date.now();
    const today = dayOf(now / 1000);
    const old = [key("2001-01-01", "old", "0.png"), key("2001-01-02", "old", "input-0.png")];
    const current = key(today, "today", "0.png");
    const future = key("2999-12-31", "future", "0.png");
    for (const k of [...old, current, future]) await store.put(k, Buffer.from("x"), "image/png");
    expect(await sweepExpiredImages(store, { nowMs: now })).toBeGreaterThanOrEqual(old.length);
    for (const k of old) expect(await store.get(k), k).toBeUndefined();
    for (const k of [current, future]) {
      const found = await store.get(k);
      expect(found, k).toBeDefined();
      found!.body.destroy();
    }
    // Nothing left to do: a second sweep deletes nothing.
    expect(await sweepExpiredImages(store, { nowMs: now })).toBe(0);
  });

  it("answers ping", async () => {
    await expect(store.ping()).resolves.toBeUndefined();
  });
});

describe("file image store", () => {
  it("leaves no temporary file behind, and two stores on one directory (replicas) agree", async () => {
    const root = join(dir, "shared");
    const one = createFileImageStore({ dir: root });
    const two = createFileImageStore({ dir: root });
    const k = key("2030-03-01", "shared", "0.png");
    await Promise.all(
      Array.from({ length: 5 }, (_, i) => one.put(k, Buffer.alloc(1000, i), "image/png")),
    );
    expect(await readdir(join(root, "2030-03-01", "task_shared"))).toEqual(["0.png"]);
    const a = await one.get(k);
    const b = await two.get(k);
    expect(a!.etag).toBe(b!.etag);
    expect((await readAll(a!.body)).equals(await readAll(b!.body))).toBe(true);
    await two.delete([k]);
    // The emptied task folder goes; the day's stays until the day is over (another replica may
    // be writing into it), then the sweep's deletes remove it.
    expect(await readdir(root)).toEqual(["2030-03-01"]);
    expect(await readdir(join(root, "2030-03-01"))).toEqual([]);
  });
});
