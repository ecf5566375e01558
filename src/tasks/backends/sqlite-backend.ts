import { constants, existsSync } from "node:fs";
import { access } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "pino";
import { fileForwardSecretHome } from "../../auth/resolve-forward-secret.js";
import type { Config } from "../../config/config-schema.js";
import { createInProcessWebhookQueue } from "../../webhooks/in-process-webhook-queue.js";
import { createLocalTaskEvents } from "../core/task-events.js";
import { createSqliteLegacyData } from "../legacy/sqlite-legacy-data.js";
import { LEGACY_SQLITE_MIGRATIONS } from "../legacy/sqlite-migrations.js";
import { createInProcessQueue } from "../queue/in-process-queue.js";
import { openSqliteDatabase, SqliteDriverError } from "../store/open-sqlite-database.js";
import { openSqliteTaskStore } from "../store/open-sqlite-task-store.js";
import {
  createSqliteKeyValue,
  createSqliteKeyValueStore,
} from "../store/sqlite-key-value-store.js";
import { createSqliteWriteBatch } from "../store/sqlite-write-batch.js";
import { createSqliteWebhookJournal } from "../store/sqlite-webhook-journal.js";
import {
  idempotencyTtlMs,
  inProcessResponseEvents,
  type TaskBackend,
  type TaskBackendKind,
} from "./task-backend.js";

/**
 * `sqlite://PATH`: one file, taken by this process alone, kept across
 * restarts. One connection serves the store's tables, the webhook journal,
 * the key-value table and the upgrade step (a file of an earlier layout moves
 * into the tables as it opens); the queues and the bus are in-process. A
 * forward secret generated here has a file of its own beside the database
 * (`<file>.forward-secret`, 0600), never the database.
 */
export function sqliteBackend(config: Config, file: string): TaskBackendKind {
  return {
    open: (logger) => openSqliteBackend(config, file, logger),
    probe: async () => probeSqliteFile(file),
  };
}

async function openSqliteBackend(
  config: Config,
  file: string,
  logger: Logger,
): Promise<TaskBackend> {
  const { store, db } = await openSqliteTaskStore(file, {
    idempotencyTtlMs: idempotencyTtlMs(config),
    logger: logger.child({ component: "store" }),
    migrations: LEGACY_SQLITE_MIGRATIONS,
  });
  const webhookJournal = createSqliteWebhookJournal(db);
  const events = createLocalTaskEvents(logger);
  // Every namespace's rows in one commit a turn; what is queued goes in before the file closes.
  const keyValueBatch = createSqliteWriteBatch(db, createSqliteKeyValueStore(db, Date.now).write);
  return {
    store,
    events,
    queue: createInProcessQueue({
      maxConcurrent: config.imageTasks.maxConcurrent,
      handsBack: true,
    }),
    webhooks: createInProcessWebhookQueue({
      journal: webhookJournal,
      logger: logger.child({ component: "webhooks" }),
    }),
    webhookJournal,
    // The file belongs to this process alone: so do the streams that read the events.
    responseEvents: inProcessResponseEvents(config),
    keyValue: (namespace) => createSqliteKeyValue(db, namespace, { batch: keyValueBatch }),
    legacy: createSqliteLegacyData(db, Date.now),
    forwardSecret: fileForwardSecretHome(`${file}.forward-secret`, logger),
    async close() {
      keyValueBatch.flush();
      await events.close();
      await store.close();
    },
  };
}

/**
 * The file opens read-only and reads (the service that holds it keeps its
 * lock), or its folder can be written when there is no file yet.
 */
async function probeSqliteFile(file: string): Promise<string> {
  if (!existsSync(file)) {
    const folder = nearestFolder(file);
    await access(folder, constants.W_OK).catch((err: NodeJS.ErrnoException) => {
      throw new Error(`store.url: ${folder} cannot be written (${err.code ?? err.message})`);
    });
    // No file to read, but the start would still need the driver: one built for another Node
    // must fail the probe, as it would fail the start.
    openSqliteDatabase(":memory:", {}).close();
    return `sqlite://${file} (not made yet; its folder can be written)`;
  }
  try {
    const db = openSqliteDatabase(file, { readonly: true, fileMustExist: true });
    try {
      db.prepare("SELECT count(*) FROM sqlite_master").get();
    } finally {
      db.close();
    }
  } catch (err) {
    // A driver that cannot load is not the file's fault: its own message.
    if (err instanceof SqliteDriverError) throw err;
    const { code, message } = err as { code?: string; message: string };
    throw new Error(`store.url: ${file} cannot be read as SQLite (${code ?? message})`);
  }
  return `sqlite://${file}`;
}

/** The deepest folder of `file`'s path that exists (SQLite's folder is made at start-up). */
function nearestFolder(file: string): string {
  let folder = dirname(file);
  while (!existsSync(folder) && dirname(folder) !== folder) folder = dirname(folder);
  return folder;
}
