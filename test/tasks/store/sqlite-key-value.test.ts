import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Database from "better-sqlite3";
import Keyv from "keyv";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { KeyValue } from "../../../src/collections/key-value.js";
import { useKeyvCodec } from "../../../src/tasks/store/keyv-codec.js";
import { openSqliteTaskStore } from "../../../src/tasks/store/open-sqlite-task-store.js";
import {
  createSqliteKeyValue,
  createSqliteKeyValueStore,
} from "../../../src/tasks/store/sqlite-key-value-store.js";
import type { TaskStore } from "../../../src/tasks/core/task-store.js";
import { openTaskBackend } from "../../../src/tasks/open-task-backend.js";
import { testConfig } from "../../support/start-test-app.js";

const odd = { channel: ":colon first", owner: 'key:é " \\ 图', n: 3 };

describe("the SQLite store's key-value entries", () => {
  let dir: string;
  let store: TaskStore;
  let db: Database.Database;
  /** Entries as this release reads and writes them. */
  let entries: KeyValue;
  /** The same table as the release before wrote and read it: everything through Keyv. */
  let older: Keyv;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "key-values-"));
    const opened = await openSqliteTaskStore(join(dir, "tasks.db"), {
      idempotencyTtlMs: 60_000,
      logger: pino({ level: "silent" }),
    });
    store = opened.store;
    db = opened.db;
    entries = createSqliteKeyValue(db, "responses");
    older = new Keyv({ store: createSqliteKeyValueStore(db, Date.now), namespace: "responses" });
    useKeyvCodec(older);
  });

  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** The table's rows, their expiry times left out (each writer took its own clock reading). */
  const rows = () =>
    (
      db.prepare("SELECT key, value FROM key_values ORDER BY key").all() as Array<{
        key: string;
        value: string;
      }>
    ).map((row) => ({ ...row, value: row.value.replace(/"expires":\d+/, '"expires":0') }));

  it("writes the rows the release before wrote, a value its codec escapes included", async () => {
    await entries.set("response-owner:resp_new", odd, 60_000);
    await entries.set("responses:response-owner:resp_named", odd, 60_000);
    await entries.set("response-owner:resp_kept", odd, 0);
    const ours = rows();
    // No time to live: no expiry, in the text (compared below) or the column.
    expect(db.prepare("SELECT expires_ms FROM key_values WHERE key LIKE '%kept'").get()).toEqual({
      expires_ms: null,
    });
    db.prepare("DELETE FROM key_values").run();
    await older.set("response-owner:resp_new", odd, 60_000);
    await older.set("responses:response-owner:resp_named", odd, 60_000);
    await older.set("response-owner:resp_kept", odd, 0);
    expect(ours).toEqual(rows());
    expect(ours.map((row) => row.key)).toEqual([
      "responses:response-owner:resp_kept",
      "responses:response-owner:resp_named",
      "responses:response-owner:resp_new",
    ]);
  });

  it("reads what the release before wrote, and it reads what this one writes", async () => {
    await older.set("response-owner:resp_old", odd, 60_000);
    await entries.set("response-owner:resp_new", odd, 60_000);
    expect(await entries.get("response-owner:resp_old")).toEqual(odd);
    expect(await older.get("response-owner:resp_new")).toEqual(odd);
    await entries.delete("response-owner:resp_old");
    expect(await older.get("response-owner:resp_old")).toBeUndefined();
  });

  it("rejects a write the file refuses, as a promise does", async () => {
    db.exec("DROP TABLE key_values");
    const written = entries.set("response-owner:resp_lost", odd, 60_000);
    await expect(written).rejects.toThrow(/key_values/);
  });

  it("forgets an entry after its time to live", async () => {
    // A clock of the test's own: a 20 ms entry read on the real clock could lapse before the
    // first read on a loaded machine (it did, in CI on Node 22). A minute ahead of the real one,
    // which Keyv's own expiry check reads: only the store's clock decides here.
    let nowMs = Date.now() + 60_000;
    const clock = () => nowMs;
    const timed = createSqliteKeyValue(db, "responses", { now: clock });
    const timedOlder = new Keyv({
      store: createSqliteKeyValueStore(db, clock),
      namespace: "responses",
    });
    useKeyvCodec(timedOlder);
    await timed.set("response-owner:resp_short", odd, 20);
    expect(await timed.get("response-owner:resp_short")).toEqual(odd);
    nowMs += 19;
    expect(await timedOlder.get("response-owner:resp_short")).toEqual(odd);
    nowMs += 41;
    expect(await timed.get("response-owner:resp_short")).toBeUndefined();
    expect(await timedOlder.get("response-owner:resp_short")).toBeUndefined();
  });

  /** Frames in the write-ahead log since it was last emptied: one or more per commit. */
  const walFrames = () => (db.pragma("wal_checkpoint(PASSIVE)") as Array<{ log: number }>)[0]!.log;

  it("commits the rows written in one turn of the event loop together", async () => {
    db.pragma("wal_checkpoint(TRUNCATE)");
    const ids = Array.from({ length: 16 }, (_, i) => `response-owner:resp_together_${i}`);
    await Promise.all(ids.map((id) => entries.set(id, odd, 60_000)));
    const together = walFrames();
    db.pragma("wal_checkpoint(TRUNCATE)");
    for (const id of ids) await entries.set(`${id}_apart`, odd, 60_000);
    const apart = walFrames();
    // Each commit wrote the table's page (and its index's) again: 16 commits, 16 times the frames.
    expect(apart).toBeGreaterThanOrEqual(16);
    expect(together).toBeLessThanOrEqual(4);
    for (const id of ids) expect(await older.get(id)).toEqual(odd);
  });

  it("reads a row before its commit, and a delete before it leaves none", async () => {
    const written = entries.set("response-owner:resp_queued", odd, 60_000);
    // Only microtasks have run: the row is queued, not committed.
    expect(rows()).toEqual([]);
    expect(await entries.get("response-owner:resp_queued")).toEqual(odd);
    const doomed = entries.set("response-owner:resp_doomed", odd, 60_000);
    await entries.delete("response-owner:resp_doomed");
    await Promise.all([written, doomed]);
    expect(rows().map((row) => row.key)).toEqual(["responses:response-owner:resp_queued"]);
    expect(await entries.get("response-owner:resp_doomed")).toBeUndefined();
  });

  it("rejects a value that does not serialize, without throwing at the caller", async () => {
    let written: Promise<void> | undefined;
    expect(() => {
      written = entries.set("response-owner:resp_big", { n: 1n }, 60_000);
    }).not.toThrow();
    await expect(written).rejects.toThrow(/BigInt/);
  });

  it("rejects every write of a refused batch, and the next batch commits", async () => {
    db.exec("ALTER TABLE key_values RENAME TO key_values_away");
    const refused = [
      entries.set("response-owner:resp_a", odd, 60_000),
      entries.set("response-owner:resp_b", odd, 60_000),
    ];
    for (const write of refused) await expect(write).rejects.toThrow(/key_values/);
    db.exec("ALTER TABLE key_values_away RENAME TO key_values");
    await entries.set("response-owner:resp_c", odd, 60_000);
    expect(rows().map((row) => row.key)).toEqual(["responses:response-owner:resp_c"]);
  });
});

describe("the SQLite backend's key-value entries across a restart", () => {
  it("commits a row still queued when the backend closes", async () => {
    const dir = await mkdtemp(join(tmpdir(), "key-values-close-"));
    try {
      const config = testConfig("http://127.0.0.1:9/v1", {
        storeUrl: `sqlite://${join(dir, "tasks.db")}`,
      });
      const logger = pino({ level: "silent" });
      const first = await openTaskBackend(config, logger);
      const written = first
        .keyValue("responses", 1000)
        .set("response-owner:resp_last", odd, 60_000);
      await first.close();
      await written;
      const second = await openTaskBackend(config, logger);
      try {
        expect(await second.keyValue("responses", 1000).get("response-owner:resp_last")).toEqual(
          odd,
        );
      } finally {
        await second.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
