import { dirname } from "node:path";
import type Database from "better-sqlite3";
import type { Logger } from "pino";
import { ConfigError } from "../../config/config-error.js";
import {
  createOwnerFileSync,
  makeOwnerDirSync,
  reportTightened,
  tightenPaths,
} from "../../fs/owner-only.js";
import { openSqliteDatabase } from "./open-sqlite-database.js";
import { lockSqliteStore } from "./sqlite-owner-lock.js";
import { applySchema, SCHEMA_VERSION } from "./sqlite-schema.js";
import { createSqliteTaskStore } from "./sqlite-task-store.js";
import type { TaskStore } from "../core/task-store.js";

/**
 * A step that brings a file an earlier release wrote up to date (see
 * `tasks/legacy/`): run inside the transaction that creates the tables, so a
 * start-up that dies halfway leaves the file as it was.
 */
export interface SqliteMigration {
  /** Whether the file holds what this step moves. */
  needed(db: Database.Database): boolean;
  /** Moves it; throws to roll the whole upgrade back. */
  run(db: Database.Database, nowMs: number, logger: Logger): void;
}

/** Options of {@link openSqliteTaskStore}. */
export interface OpenSqliteOptions {
  idempotencyTtlMs: number;
  logger: Logger;
  /** Steps for files earlier releases wrote, in order. Default: none. */
  migrations?: readonly SqliteMigration[];
  now?: () => number;
}

/** An open SQLite store, and its connection for the steps that read what earlier releases left. */
export interface OpenedSqliteStore {
  store: TaskStore;
  db: Database.Database;
}

/**
 * Opens the SQLite store in `file` (its folder created) for this process
 * alone, its files owner-only (0600, those an earlier release left tightened): takes the file's lock (a second process is refused, naming the
 * holder), switches to WAL, creates or upgrades the tables in one
 * transaction (with `migrations`), and builds the store.
 *
 * `synchronous = NORMAL` in WAL mode: a commit is in the WAL before the call
 * returns, so a killed process loses nothing it committed; only a power cut
 * or an OS crash may lose the last commits (never corrupt the file).
 */
export async function openSqliteTaskStore(
  file: string,
  options: OpenSqliteOptions,
): Promise<OpenedSqliteStore> {
  const now = options.now ?? Date.now;
  // Owner-only from the first byte: the file keeps the link-signing secret. SQLite gives its
  // WAL and shared-memory files the database file's mode.
  makeOwnerDirSync(dirname(file));
  createOwnerFileSync(file);
  // Short: the lock is held for the process's life, so only a second process ever waits.
  const db = openSqliteDatabase(file, { timeout: 1000 });
  let unlock: () => Promise<void>;
  try {
    unlock = await lockSqliteStore({ query: async (sql) => db.exec(sql) }, file);
  } catch (err) {
    db.close();
    throw err;
  }
  try {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
    // 16 MiB of pages (default 2): the task id index, the one written at random places,
    // stays in memory up to a few hundred thousand tasks.
    db.pragma("cache_size = -16384");
    // The WAL is cut back to 64 MiB after a checkpoint, not kept at its peak (a migration
    // writes every image of the old table through it).
    db.pragma("journal_size_limit = 67108864");
    // What an earlier release created under a permissive umask.
    reportTightened(
      options.logger,
      `store.url: sqlite://${file}`,
      await tightenPaths([file, `${file}-wal`, `${file}-shm`, `${file}.owner`]),
    );
    upgrade(db, file, now(), options);
    const store = createSqliteTaskStore(db, { idempotencyTtlMs: options.idempotencyTtlMs, now });
    return {
      store: {
        ...store,
        async close() {
          await store.close();
          await unlock();
        },
      },
      db,
    };
  } catch (err) {
    db.close();
    await unlock();
    throw err;
  }
}

/** Brings the file to {@link SCHEMA_VERSION} in one transaction; runs once per file. */
function upgrade(
  db: Database.Database,
  file: string,
  nowMs: number,
  options: Pick<OpenSqliteOptions, "migrations" | "logger">,
): void {
  const version = db.pragma("user_version", { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    throw new ConfigError([
      `store.url: sqlite://${file} was written by a newer release (schema ${version}; this one knows up to ${SCHEMA_VERSION})`,
    ]);
  }
  const due = (options.migrations ?? []).filter((migration) => migration.needed(db));
  // What earlier releases kept may hold sealed keys or secrets: pages a migration frees are
  // zeroed, not left in the file's free list.
  if (due.length > 0) db.pragma("secure_delete = ON");
  try {
    db.transaction(() => {
      applySchema(db);
      for (const migration of due) migration.run(db, nowMs, options.logger);
      db.pragma(`user_version = ${SCHEMA_VERSION}`);
    }).immediate();
  } finally {
    if (due.length > 0) db.pragma("secure_delete = OFF");
  }
}
