import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import type { Logger } from "pino";
import { ConfigError } from "../../config/config-error.js";
import { createImageBlobs, type ImageBlobs } from "./sqlite-image-blobs.js";
import { hasKeyvTable, migrateKeyvTable } from "./sqlite-legacy-migration.js";
import { lockSqliteStore } from "./sqlite-owner-lock.js";
import { applySchema, SCHEMA_VERSION } from "./sqlite-schema.js";
import { createSqliteTaskStore } from "./sqlite-task-store.js";
import type { TaskStore } from "../core/task-store.js";

/** Options of {@link openSqliteTaskStore}. */
export interface OpenSqliteOptions {
  idempotencyTtlMs: number;
  logger: Logger;
  now?: () => number;
}

/**
 * Opens the SQLite store in `file` (its folder created) for this process
 * alone: takes the file's lock (a second process is refused, naming the
 * holder), switches to WAL, creates or upgrades the tables in one
 * transaction (moving what the Keyv-table release wrote), and builds the store.
 *
 * `synchronous = NORMAL` in WAL mode: a commit is in the WAL before the call
 * returns, so a killed process loses nothing it committed; only a power cut
 * or an OS crash may lose the last commits (never corrupt the file).
 */
export async function openSqliteTaskStore(
  file: string,
  options: OpenSqliteOptions,
): Promise<TaskStore> {
  const now = options.now ?? Date.now;
  mkdirSync(dirname(file), { recursive: true });
  // Short: the lock is held for the process's life, so only a second process ever waits.
  const db = new Database(file, { timeout: 1000 });
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
    const blobs = upgrade(db, file, now, options.logger);
    const store = createSqliteTaskStore(db, {
      idempotencyTtlMs: options.idempotencyTtlMs,
      blobs,
      now,
    });
    return {
      ...store,
      async close() {
        await store.close();
        await unlock();
      },
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
  now: () => number,
  logger: Logger,
): ImageBlobs {
  const version = db.pragma("user_version", { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    throw new ConfigError([
      `store.url: sqlite://${file} was written by a newer release (schema ${version}; this one knows up to ${SCHEMA_VERSION})`,
    ]);
  }
  // The Keyv table held sealed keys and, in older releases, forward mode's secret: its
  // pages are zeroed as it is dropped, not left in the file's free list.
  const legacy = hasKeyvTable(db);
  if (legacy) db.pragma("secure_delete = ON");
  const blobs = db
    .transaction(() => {
      applySchema(db);
      const blobs = createImageBlobs(db, now);
      if (legacy) {
        const started = Date.now();
        const report = migrateKeyvTable(db, blobs, now());
        logger.info(
          { ...report, ms: Date.now() - started },
          "moved the task store from its Keyv table into SQL tables",
        );
      }
      db.pragma(`user_version = ${SCHEMA_VERSION}`);
      return blobs;
    })
    .immediate();
  if (legacy) db.pragma("secure_delete = OFF");
  return blobs;
}
