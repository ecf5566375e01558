import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import Keyv from "keyv";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openSqliteTaskStore } from "../../../src/tasks/store/open-sqlite-task-store.js";
import { createSqliteKeyValueStore } from "../../../src/tasks/store/sqlite-key-value-store.js";
import type { TaskStore } from "../../../src/tasks/core/task-store.js";
import { newTaskId, type TaskRecord } from "../../../src/tasks/core/task-record.js";

describe("expired tasks leave the SQLite file", () => {
  let dir: string;
  let file: string;
  let clock: number;
  let store: TaskStore;
  /** The store's connection, which the backend's key-value entries share. */
  let db: Database.Database;

  const open = async () => {
    const opened = await openSqliteTaskStore(file, {
      idempotencyTtlMs: 5 * 60_000,
      logger: pino({ level: "silent" }),
      now: () => clock,
    });
    db = opened.db;
    return opened.store;
  };
  /** The image store keys the sweeps handed over, to be deleted with their tasks. */
  let dropped: string[];
  const drop = async (keys: string[]) => void dropped.push(...keys);

  /**
   * Rows on disk, read with a connection of its own. The store holds the file's lock, so it
   * is closed for the look and opened again (as a restart would).
   */
  async function rows(table: string, where = "1"): Promise<number> {
    await store.close();
    const reader = new Database(file, { readonly: true });
    const { n } = reader.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`).get() as {
      n: number;
    };
    reader.close();
    store = await open();
    return n;
  }

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "sweep-"));
    file = join(dir, "sweep.db");
    clock = Date.UTC(2026, 0, 1);
    dropped = [];
    store = await open();
  });

  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  const task = (): TaskRecord => ({
    id: newTaskId(),
    owner: "key:owner",
    status: "queued",
    model: "gpt-image-1",
    request: { prompt: "sweep me" },
    responseFormat: "b64_json",
    created: Math.floor(clock / 1000),
    attempts: 0,
  });

  async function finishedTask(ttlMs: number, idempotencyKey?: string): Promise<string> {
    const queued = task();
    await store.create(queued, {
      idempotency: idempotencyKey ? { key: idempotencyKey, fingerprint: "f" } : undefined,
    });
    await store.transition(queued.id, "queued", { status: "in_progress" });
    const images = [
      { mime: "image/png", bytes: 11, key: `2026-01-01/${queued.id}/0.png` },
      { mime: "image/png", bytes: 11, key: `2026-01-01/${queued.id}/1.png` },
    ];
    await store.transition(queued.id, "in_progress", { status: "completed", images }, { ttlMs });
    return queued.id;
  }

  it("deletes a finished task, its images and its idempotency key once they expired", async () => {
    const id = await finishedTask(60_000, "idem-1");
    expect(await rows("tasks", `id = '${id}'`)).toBe(1);
    expect(await rows("idempotency")).toBe(1);

    clock += 30_000; // not expired yet
    expect(await store.sweepExpired(drop)).toBe(0);
    expect(await rows("tasks", `id = '${id}'`)).toBe(1);
    expect(dropped).toEqual([]);

    clock += 10 * 60_000; // task, images and idempotency key all expired
    expect(await store.sweepExpired(drop)).toBe(2);
    expect(await rows("tasks")).toBe(0);
    // Its images go to the image store to be deleted with it.
    expect(dropped.sort()).toEqual([`2026-01-01/${id}/0.png`, `2026-01-01/${id}/1.png`]);
    expect(await rows("idempotency")).toBe(0);
    // The owner's share of the store is free again.
    expect(await rows("owners")).toBe(0);
    expect((await store.create(task(), { maxPerOwner: 1 })).kind).toBe("created");
  });

  it("keeps what has not expired and sweeps each task when its time comes", async () => {
    const short = await finishedTask(60_000);
    const long = await finishedTask(60 * 60_000);
    clock += 5 * 60_000;
    await store.sweepExpired(drop);
    expect(await rows("tasks", `id = '${short}'`)).toBe(0);
    expect(dropped.filter((key) => key.includes(short))).toHaveLength(2);
    expect(await rows("tasks", `id = '${long}'`)).toBe(1);
    expect(dropped.filter((key) => key.includes(long))).toHaveLength(0);
    expect((await store.get(long))?.status).toBe("completed");
    clock += 60 * 60_000;
    await store.sweepExpired();
    expect(await rows("tasks", `id = '${long}'`)).toBe(0);
  });

  it("sweeps a backlog in batches, and the Responses owners' entries with it", async () => {
    const keyv = new Keyv({
      store: createSqliteKeyValueStore(db, () => clock),
      namespace: "responses",
    });
    await keyv.set("response-owner:resp_1", { channel: "c", owner: "o" }, 60_000);
    const owner: TaskRecord["owner"] = "key:owner";
    for (let i = 0; i < 1_200; i += 1) {
      const queued = task();
      await store.create(queued);
      await store.transition(queued.id, "queued", { status: "failed" }, { ttlMs: 60_000 });
    }
    expect((await store.listOwned(owner, { limit: 1, nowSec: 0 }))?.hasMore).toBe(true);
    expect(await rows("key_values")).toBe(1);

    clock += 2 * 60_000;
    expect(await store.sweepExpired()).toBe(1_201);
    expect(await rows("tasks")).toBe(0);
    expect(await rows("key_values")).toBe(0);
    expect(await rows("owners")).toBe(0);
    expect(await store.listOwned(owner, { limit: 1, nowSec: 0 })).toEqual({
      records: [],
      hasMore: false,
    });
  });
});
