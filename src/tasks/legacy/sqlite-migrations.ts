import type { SqliteMigration } from "../store/open-sqlite-task-store.js";
import { hasKeyvTable, migrateKeyvTable } from "./sqlite-keyv-migration.js";

/**
 * The steps a SQLite file of an earlier release takes when it is opened,
 * inside the transaction that creates the tables: the Keyv-table layout
 * (the release before the SQL tables) moves into the tables.
 */
export const LEGACY_SQLITE_MIGRATIONS: readonly SqliteMigration[] = [
  {
    needed: hasKeyvTable,
    run(db, nowMs, logger) {
      const started = Date.now();
      const report = migrateKeyvTable(db, nowMs);
      logger.info(
        { ...report, ms: Date.now() - started },
        "moved the task store from its Keyv table into SQL tables",
      );
    },
  },
];
