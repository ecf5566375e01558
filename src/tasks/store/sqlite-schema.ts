import type { Database } from "better-sqlite3";

/** `PRAGMA user_version` of a database laid out as {@link SCHEMA} says. */
export const SCHEMA_VERSION = 1;

/**
 * The SQLite task store's tables. Every time a column holds is in
 * milliseconds since the epoch (`*_ms`) or, where it mirrors the record,
 * Unix seconds. A finished task's `expires_ms` is when the sweep deletes it;
 * reads treat a row past it as gone already, as Keyv did.
 */
export const SCHEMA = `
CREATE TABLE IF NOT EXISTS tasks (
  seq INTEGER PRIMARY KEY,          -- creation order, for the owner's list
  id TEXT NOT NULL UNIQUE,
  owner TEXT NOT NULL,
  status TEXT NOT NULL,
  created INTEGER NOT NULL,         -- the record's created (s)
  expires_at INTEGER,               -- the record's expires_at (s): the list leaves it out past it
  expires_ms INTEGER,               -- when the store deletes the task
  record TEXT NOT NULL              -- the TaskRecord, JSON
);
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, seq);
CREATE INDEX IF NOT EXISTS tasks_by_owner_status ON tasks (owner, status, seq);
CREATE INDEX IF NOT EXISTS tasks_unfinished ON tasks (created, seq)
  WHERE status IN ('queued', 'in_progress');
CREATE INDEX IF NOT EXISTS tasks_expiring ON tasks (expires_ms) WHERE expires_ms IS NOT NULL;

-- Tasks each owner holds (its share of the store), kept with every create and sweep so that
-- the check costs one row, not a count over the owner's tasks.
CREATE TABLE IF NOT EXISTS owners (
  owner TEXT PRIMARY KEY,
  tasks INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS idempotency (
  owner TEXT NOT NULL,
  key TEXT NOT NULL,
  task_id TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  expires_ms INTEGER NOT NULL,
  PRIMARY KEY (owner, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_expiring ON idempotency (expires_ms);

-- Finished tasks whose webhook event is not handed to the delivery queue yet, in the order
-- they finished.
CREATE TABLE IF NOT EXISTS webhook_outbox (
  seq INTEGER PRIMARY KEY,
  task_id TEXT NOT NULL UNIQUE,
  since_ms INTEGER NOT NULL
);

-- The in-process webhook queue's pending deliveries (PendingDelivery, JSON), in the order
-- they were first saved.
CREATE TABLE IF NOT EXISTS webhook_journal (
  seq INTEGER PRIMARY KEY,
  event_id TEXT NOT NULL UNIQUE,
  pending TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

-- Keyv entries (namespaced keys, Keyv-serialized values): the Responses owners.
CREATE TABLE IF NOT EXISTS key_values (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  expires_ms INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS key_values_expiring ON key_values (expires_ms)
  WHERE expires_ms IS NOT NULL;
`;

/** Creates what is missing of {@link SCHEMA}; part of the caller's transaction. */
export function applySchema(db: Database): void {
  db.exec(SCHEMA);
}
