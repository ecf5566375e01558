import type { Database } from "better-sqlite3";
import type { TaskRecord } from "../core/task-record.js";
import type { LegacyTask, LegacyTaskData } from "./legacy-task-data.js";
import { hasImageBlobs, type BlobKind } from "./sqlite-image-blobs.js";

interface BlobRow {
  kind: BlobKind;
  idx: number;
  bytes: Buffer;
}

/**
 * {@link LegacyTaskData} of a SQLite file: the `image_blobs` table earlier
 * releases (and the Keyv-table migration) wrote, and the `meta` table.
 * Runs on the store's own connection, in the one process that holds the file.
 */
export function createSqliteLegacyData(db: Database, now: () => number): LegacyTaskData {
  const read = (id: string): LegacyTask => readTask(db, id, now());
  return {
    async tasksWithBytes(limit) {
      if (!hasImageBlobs(db)) return [];
      const ids = db
        .prepare("SELECT DISTINCT task_id FROM image_blobs LIMIT ?")
        .pluck()
        .all(limit) as string[];
      return ids.map(read);
    },
    async settle(task, record) {
      const settle = db.transaction(() => {
        if (record) {
          const written = db
            .prepare("UPDATE tasks SET record = ? WHERE id = ? AND record = ?")
            .run(JSON.stringify(record), task.id, task.version).changes;
          if (written === 0) return false;
        }
        db.prepare("DELETE FROM image_blobs WHERE task_id = ?").run(task.id);
        return true;
      });
      return settle.immediate();
    },
    reload: async (id) => read(id),
    async finish() {
      if (!hasImageBlobs(db)) return;
      withSecureDelete(db, () => db.exec("DROP TABLE image_blobs"));
    },
    getMeta: async (key) =>
      db.prepare("SELECT value FROM meta WHERE key = ?").pluck().get(key) as string | undefined,
    async deleteMeta(key) {
      // A meta value may be a secret moving out of the file: its bytes are overwritten, not freed.
      withSecureDelete(db, () => db.prepare("DELETE FROM meta WHERE key = ?").run(key));
    },
  };
}

function readTask(db: Database, id: string, nowMs: number): LegacyTask {
  const text = db.prepare("SELECT record FROM tasks WHERE id = ?").pluck().get(id) as
    string | undefined;
  const rows = db
    .prepare("SELECT kind, idx, bytes FROM image_blobs WHERE task_id = ? AND expires_ms > ?")
    .all(id, nowMs) as BlobRow[];
  const byKind = (kind: BlobKind) =>
    new Map(rows.filter((row) => row.kind === kind).map((row) => [row.idx, row.bytes]));
  return {
    id,
    record: text === undefined ? undefined : (JSON.parse(text) as TaskRecord),
    images: byKind("image"),
    inputs: byKind("input"),
    version: text ?? "",
  };
}

function withSecureDelete(db: Database, step: () => unknown): void {
  db.pragma("secure_delete = ON");
  try {
    step();
  } finally {
    db.pragma("secure_delete = OFF");
  }
}
