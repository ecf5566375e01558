import type { Database, Statement } from "better-sqlite3";

/** A task's row as the store reads it back. */
export interface TaskRow {
  record: string;
}

/** Rows a task counts as unfinished in (the `tasks_unfinished` index's condition). */
const UNFINISHED = "status IN ('queued', 'in_progress')";
/** A row the store still shows: not past the time it is deleted at. */
const LIVE = "(expires_ms IS NULL OR expires_ms > @nowMs)";
/** A task the owner's list shows: unfinished, or finished and not past its `expires_at`. */
const LISTED = `(${UNFINISHED} OR expires_at IS NULL OR expires_at > @nowSec)`;

/**
 * Every statement of the SQLite task store, prepared once. Each names the
 * index it runs on: none of them walks the table or costs more as tasks pile up.
 */
export function prepareTaskStatements(db: Database): TaskStatements {
  const statement = (sql: string): Statement => db.prepare(sql);
  const value = (sql: string): Statement => db.prepare(sql).pluck();
  return {
    getTask: statement(
      "SELECT record FROM tasks WHERE id = ? AND (expires_ms IS NULL OR expires_ms > ?)",
    ),
    insertTask: statement(
      `INSERT INTO tasks (id, owner, status, created, expires_at, record)
       VALUES (@id, @owner, @status, @created, @expires_at, @record)`,
    ),
    updateTask: statement(
      `UPDATE tasks SET status = @status, expires_at = @expires_at, expires_ms = @expires_ms,
       record = @record WHERE id = @id`,
    ),
    deleteTask: statement("DELETE FROM tasks WHERE seq = ?"),
    // tasks.id, whatever its expiry: what a delete takes
    taskById: statement("SELECT seq, owner, record FROM tasks WHERE id = ?"),
    // tasks_unfinished
    unfinished: statement(`SELECT record FROM tasks WHERE ${UNFINISHED} ORDER BY created, seq`),
    // tasks.id, then tasks_by_owner / tasks_by_owner_status
    ownedSeq: value("SELECT seq FROM tasks WHERE id = ? AND owner = ?"),
    owned: statement(
      `SELECT record FROM tasks WHERE owner = @owner AND seq < @before AND ${LIVE} AND ${LISTED}
       ORDER BY seq DESC LIMIT @limit`,
    ),
    ownedByStatus: statement(
      `SELECT record FROM tasks WHERE owner = @owner AND status = @status AND seq < @before
       AND ${LIVE} AND ${LISTED} ORDER BY seq DESC LIMIT @limit`,
    ),
    ownedAsc: statement(
      `SELECT record FROM tasks WHERE owner = @owner AND seq > @after AND ${LIVE} AND ${LISTED}
       ORDER BY seq LIMIT @limit`,
    ),
    ownedByStatusAsc: statement(
      `SELECT record FROM tasks WHERE owner = @owner AND status = @status AND seq > @after
       AND ${LIVE} AND ${LISTED} ORDER BY seq LIMIT @limit`,
    ),
    // tasks_expiring
    expiredTasks: statement(
      "SELECT seq, owner, record FROM tasks WHERE expires_ms <= ? ORDER BY expires_ms LIMIT ?",
    ),

    ownerTasks: value("SELECT tasks FROM owners WHERE owner = ?"),
    addOwnerTasks: statement(
      `INSERT INTO owners (owner, tasks) VALUES (?, ?)
       ON CONFLICT (owner) DO UPDATE SET tasks = tasks + excluded.tasks`,
    ),
    dropEmptyOwner: statement("DELETE FROM owners WHERE owner = ? AND tasks <= 0"),

    getIdempotency: statement(
      "SELECT task_id, fingerprint FROM idempotency WHERE owner = ? AND key = ? AND expires_ms > ?",
    ),
    putIdempotency: statement(
      `INSERT INTO idempotency (owner, key, task_id, fingerprint, expires_ms) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (owner, key) DO UPDATE SET task_id = excluded.task_id,
       fingerprint = excluded.fingerprint, expires_ms = excluded.expires_ms`,
    ),
    deleteExpiredIdempotency: statement(
      `DELETE FROM idempotency WHERE (owner, key) IN
       (SELECT owner, key FROM idempotency WHERE expires_ms <= ? LIMIT ?)`,
    ),

    outbox: statement(
      "SELECT task_id AS id, since_ms AS sinceMs FROM webhook_outbox ORDER BY seq LIMIT ?",
    ),
    putOutbox: statement(
      `INSERT INTO webhook_outbox (task_id, since_ms) VALUES (?, ?)
       ON CONFLICT (task_id) DO NOTHING`,
    ),
    clearOutbox: statement("DELETE FROM webhook_outbox WHERE task_id = ?"),

    getMeta: value("SELECT value FROM meta WHERE key = ?"),
    putMeta: statement("INSERT INTO meta (key, value) VALUES (?, ?)"),

    deleteExpiredValues: statement(
      `DELETE FROM key_values WHERE key IN
       (SELECT key FROM key_values WHERE expires_ms <= ? LIMIT ?)`,
    ),
    ping: value("SELECT 1"),
  };
}

/** The prepared statements of one database, by name. */
export type TaskStatements = Record<StatementName, Statement>;

type StatementName =
  | "getTask"
  | "insertTask"
  | "updateTask"
  | "deleteTask"
  | "taskById"
  | "unfinished"
  | "ownedSeq"
  | "owned"
  | "ownedByStatus"
  | "ownedAsc"
  | "ownedByStatusAsc"
  | "expiredTasks"
  | "ownerTasks"
  | "addOwnerTasks"
  | "dropEmptyOwner"
  | "getIdempotency"
  | "putIdempotency"
  | "deleteExpiredIdempotency"
  | "outbox"
  | "putOutbox"
  | "clearOutbox"
  | "getMeta"
  | "putMeta"
  | "deleteExpiredValues"
  | "ping";
