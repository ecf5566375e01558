import type { Database } from "better-sqlite3";
import Keyv from "keyv";
import type { TaskRecord } from "../core/task-record.js";
import { createKeyvCodec, type KeyvEntry } from "../store/keyv-codec.js";
import { createImageBlobWriter } from "./sqlite-image-blobs.js";

/** What {@link migrateKeyvTable} moved, for the start-up log. */
export interface MigrationReport {
  tasks: number;
  images: number;
  entries: number;
  /** Rows that could not be read (left behind, dropped with the old table). */
  unreadable: number;
}

/** The namespace the Keyv-table release kept every entry under. */
const NS = "its:";
/** Image rows read at once: their base64 text may be megabytes each. */
const IMAGE_CHUNK = 64;

/** Whether `db` still holds the Keyv table of the release before the SQL tables. */
export function hasKeyvTable(db: Database): boolean {
  return (
    db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'keyv'").get() !==
    undefined
  );
}

/**
 * Moves what the Keyv-table release wrote (one `keyv` table of Keyv-serialized
 * entries, indexes as JSON lists) into the SQL tables, then drops the old
 * table. Runs inside the caller's transaction: a start-up that dies halfway
 * leaves the file as it was. Expired entries and the derived lists (the
 * unfinished list, expiry buckets, owner lists, the sweep's mark) are not
 * copied: the tables and their indexes hold the same facts.
 */
export function migrateKeyvTable(db: Database, nowMs: number): MigrationReport {
  const codec = createKeyvCodec(new Keyv());
  const report: MigrationReport = { tasks: 0, images: 0, entries: 0, unreadable: 0 };
  const decode = (text: string): KeyvEntry | undefined => {
    try {
      const entry = codec.deserialize<KeyvEntry>(text);
      const live = entry && (typeof entry.expires !== "number" || entry.expires > nowMs);
      return live ? entry : undefined;
    } catch {
      report.unreadable += 1;
      return undefined;
    }
  };

  const entries = new Map<string, KeyvEntry>();
  const small = db.prepare(
    "SELECT key, value FROM keyv WHERE key LIKE 'its:%' AND key NOT LIKE 'its:image:%' AND key NOT LIKE 'its:input:%'",
  );
  for (const { key, value } of small.all() as Array<{ key: string; value: string }>) {
    const entry = decode(value);
    if (entry) entries.set(key.slice(NS.length), entry);
  }
  const tasks = moveTasks(db, entries, report);
  moveIdempotencyKeys(db, entries, tasks);
  moveWebhooks(db, entries, report);
  const putMeta = db.prepare("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)");
  for (const [key, entry] of entries) {
    if (!key.startsWith("meta:") || key === "meta:swept-until") continue;
    if (typeof entry.value === "string") putMeta.run(key.slice("meta:".length), entry.value);
  }
  report.images = moveImages(db, decode);
  db.exec("DROP TABLE keyv");
  return report;
}

/** Tasks in creation order (by `created`, then their place in the owner's list). */
function moveTasks(
  db: Database,
  entries: Map<string, KeyvEntry>,
  report: MigrationReport,
): Map<string, TaskRecord> {
  const place = new Map<string, number>();
  for (const [key, entry] of entries) {
    if (!key.startsWith("owner:") || !Array.isArray(entry.value)) continue;
    (entry.value as Array<[string]>).forEach(([id], at) => place.set(id, at));
  }
  const found: Array<{ record: TaskRecord; expires?: number }> = [];
  for (const [key, entry] of entries) {
    const record = entry.value as TaskRecord | undefined;
    if (key.startsWith("task:") && typeof record?.id === "string" && record.owner) {
      found.push({ record, expires: entry.expires });
    }
  }
  found.sort(
    (a, b) =>
      a.record.created - b.record.created ||
      (place.get(a.record.id) ?? 0) - (place.get(b.record.id) ?? 0),
  );
  const insert = db.prepare(
    `INSERT OR IGNORE INTO tasks (id, owner, status, created, expires_at, expires_ms, record)
     VALUES (?, ?, ?, ?, ?, ?, ?)`,
  );
  const addOwner = db.prepare(
    `INSERT INTO owners (owner, tasks) VALUES (?, 1)
     ON CONFLICT (owner) DO UPDATE SET tasks = tasks + 1`,
  );
  const tasks = new Map<string, TaskRecord>();
  for (const { record, expires } of found) {
    const { id, owner, status, created } = record;
    insert.run(
      id,
      owner,
      status,
      created,
      record.expires_at ?? null,
      expires ?? null,
      JSON.stringify(record),
    );
    addOwner.run(owner);
    tasks.set(id, record);
  }
  report.tasks = tasks.size;
  report.entries += tasks.size;
  return tasks;
}

/** `idem:<owner>:<key>`, for tasks that still exist (the owner may hold colons). */
function moveIdempotencyKeys(
  db: Database,
  entries: Map<string, KeyvEntry>,
  tasks: Map<string, TaskRecord>,
): void {
  const insert = db.prepare(
    `INSERT OR IGNORE INTO idempotency (owner, key, task_id, fingerprint, expires_ms)
     VALUES (?, ?, ?, ?, ?)`,
  );
  for (const [key, entry] of entries) {
    if (!key.startsWith("idem:")) continue;
    const seen = entry.value as { taskId?: string; fingerprint?: string } | undefined;
    const owner = seen?.taskId && tasks.get(seen.taskId)?.owner;
    const rest = key.slice("idem:".length);
    if (!owner || !rest.startsWith(`${owner}:`) || typeof seen.fingerprint !== "string") continue;
    const expires = entry.expires ?? Number.MAX_SAFE_INTEGER;
    insert.run(owner, rest.slice(owner.length + 1), seen.taskId, seen.fingerprint, expires);
  }
}

/** The outbox and the pending deliveries, in their order. */
function moveWebhooks(db: Database, entries: Map<string, KeyvEntry>, report: MigrationReport) {
  const outbox = (entries.get("index:webhook-outbox")?.value ?? []) as Array<[string, number]>;
  const putOutbox = db.prepare(
    "INSERT OR IGNORE INTO webhook_outbox (task_id, since_ms) VALUES (?, ?)",
  );
  for (const [id, sinceMs] of outbox) putOutbox.run(id, sinceMs);
  const listed = (entries.get("index:webhooks")?.value ?? []) as string[];
  const saved = [...entries.keys()]
    .filter((key) => key.startsWith("webhook:"))
    .map((key) => key.slice("webhook:".length));
  const putJournal = db.prepare(
    "INSERT OR IGNORE INTO webhook_journal (event_id, pending) VALUES (?, ?)",
  );
  for (const eventId of new Set([...listed, ...saved])) {
    const pending = entries.get(`webhook:${eventId}`)?.value;
    if (pending) putJournal.run(eventId, JSON.stringify(pending));
  }
  report.entries += outbox.length + listed.length;
}

/**
 * Result and input images, base64 text in the old table, into the blob table
 * (from which the upgrade step moves them into the image store).
 */
function moveImages(db: Database, decode: (text: string) => KeyvEntry | undefined): number {
  const put = createImageBlobWriter(db);
  const chunk = db.prepare(
    `SELECT rowid AS at, key, value FROM keyv WHERE rowid > ?
     AND (key LIKE 'its:image:%' OR key LIKE 'its:input:%') ORDER BY rowid LIMIT ?`,
  );
  const name = /^its:(image|input):(.+):(\d+)$/;
  let after = 0;
  let moved = 0;
  for (;;) {
    const rows = chunk.all(after, IMAGE_CHUNK) as Array<{ at: number; key: string; value: string }>;
    if (rows.length === 0) return moved;
    for (const { at, key, value } of rows) {
      after = at;
      const match = name.exec(key);
      const entry = match && decode(value);
      const stored = entry?.value;
      if (!match || !entry || (typeof stored !== "string" && !Buffer.isBuffer(stored))) continue;
      const bytes = typeof stored === "string" ? Buffer.from(stored, "base64") : stored;
      const expires = entry.expires ?? Number.MAX_SAFE_INTEGER;
      put(match[1] as "image" | "input", match[2]!, Number(match[3]), bytes, expires);
      moved += 1;
    }
  }
}
