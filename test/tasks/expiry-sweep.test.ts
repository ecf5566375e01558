import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import KeyvSqlite from "@keyv/sqlite";
import Keyv from "keyv";
import sqlite3 from "sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createKeyvTaskStore } from "../../src/tasks/store/keyv-task-store.js";
import { newTaskId, type TaskRecord } from "../../src/tasks/task-record.js";
import type { TaskStore } from "../../src/tasks/store/task-store.js";

/** Rows in the SQLite file, read with a connection of its own: what really is on disk. */
function countRows(file: string, like: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const db = new sqlite3.Database(file, sqlite3.OPEN_READONLY, (openErr) => {
      if (openErr) return reject(openErr);
      db.get("SELECT COUNT(*) AS n FROM keyv WHERE key LIKE ?", [like], (err, row) => {
        db.close();
        if (err) reject(err);
        else resolve((row as { n: number }).n);
      });
    });
  });
}

describe("expired tasks leave the SQLite file", () => {
  let dir: string;
  let file: string;
  let clock: number;
  let store: TaskStore;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "sweep-"));
    file = join(dir, "sweep.db");
    clock = Date.UTC(2026, 0, 1);
    const keyv = new Keyv({
      store: new KeyvSqlite({ uri: `sqlite://${file}` }),
      namespace: "its",
    });
    store = createKeyvTaskStore(keyv, {
      persistent: true,
      idempotencyTtlMs: 5 * 60_000,
      now: () => clock,
    });
    await store.sweepExpired(); // as createTaskStore does when it opens a store
  });

  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function finishedTask(ttlMs: number, idempotencyKey?: string): Promise<string> {
    const task: TaskRecord = {
      id: newTaskId(),
      owner: "key:owner",
      status: "queued",
      model: "gpt-image-1",
      request: { prompt: "sweep me" },
      responseFormat: "b64_json",
      created: Math.floor(clock / 1000),
      attempts: 0,
    };
    await store.create(task, {
      idempotency: idempotencyKey ? { key: idempotencyKey, fingerprint: "f" } : undefined,
    });
    await store.transition(task.id, "queued", { status: "in_progress" });
    await store.putImage(task.id, 0, Buffer.from("image bytes"), ttlMs);
    await store.putImage(task.id, 1, Buffer.from("image bytes"), ttlMs);
    await store.transition(
      task.id,
      "in_progress",
      {
        status: "completed",
        images: [
          { mime: "image/png", bytes: 11 },
          { mime: "image/png", bytes: 11 },
        ],
      },
      { ttlMs },
    );
    return task.id;
  }

  it("deletes a finished task, its images and its idempotency key once they expired", async () => {
    const id = await finishedTask(60_000, "idem-1");
    expect(await countRows(file, `its:%${id}%`)).toBe(3);
    expect(await countRows(file, "its:idem:%")).toBe(1);

    clock += 30_000; // not expired yet
    expect(await store.sweepExpired()).toBe(0);
    expect(await countRows(file, `its:%${id}%`)).toBe(3);

    clock += 10 * 60_000; // task, images and idempotency key all expired
    expect(await store.sweepExpired()).toBe(4);
    expect(await countRows(file, `its:%${id}%`)).toBe(0);
    expect(await countRows(file, "its:idem:%")).toBe(0);
    expect(await countRows(file, "its:expiring:%")).toBe(0);
    // The owner's share of the store is free again.
    expect(await countRows(file, "its:owner:%")).toBe(0);
    const next: TaskRecord = {
      id: newTaskId(),
      owner: "key:owner",
      status: "queued",
      model: "gpt-image-1",
      request: { prompt: "after the sweep" },
      responseFormat: "b64_json",
      created: Math.floor(clock / 1000),
      attempts: 0,
    };
    expect((await store.create(next, { maxPerOwner: 1 })).kind).toBe("created");
  });

  it("keeps what has not expired and sweeps each task in its own minute", async () => {
    const short = await finishedTask(60_000);
    const long = await finishedTask(60 * 60_000);
    clock += 5 * 60_000;
    await store.sweepExpired();
    expect(await countRows(file, `its:%${short}%`)).toBe(0);
    expect(await countRows(file, `its:%${long}%`)).toBe(3);
    expect((await store.get(long))?.status).toBe("completed");
    clock += 60 * 60_000;
    await store.sweepExpired();
    expect(await countRows(file, `its:%${long}%`)).toBe(0);
  });
});
