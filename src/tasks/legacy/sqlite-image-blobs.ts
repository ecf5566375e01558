import type { Database } from "better-sqlite3";

/**
 * Image bytes (results and edit inputs) as releases before the image store
 * kept them in the SQLite file: one table of blobs, each with its own expiry.
 * The upgrade step moves them into the image store and drops the table.
 */
const IMAGE_BLOBS_SCHEMA = `
CREATE TABLE IF NOT EXISTS image_blobs (
  task_id TEXT NOT NULL,
  kind TEXT NOT NULL,               -- 'image' (a result) or 'input' (an edit's)
  idx INTEGER NOT NULL,
  bytes BLOB NOT NULL,
  expires_ms INTEGER NOT NULL,
  PRIMARY KEY (task_id, kind, idx)
);
`;

/** A result image or an edit's input image. */
export type BlobKind = "image" | "input";

/** Whether `db` holds blobs of an earlier release (or the Keyv-table migration's). */
export function hasImageBlobs(db: Database): boolean {
  return (
    db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'image_blobs'")
      .get() !== undefined
  );
}

/**
 * A writer of blobs for the Keyv-table migration, which runs inside the
 * schema's transaction (the table is created when missing).
 */
export function createImageBlobWriter(
  db: Database,
): (kind: BlobKind, id: string, index: number, bytes: Buffer, expiresMs: number) => void {
  db.exec(IMAGE_BLOBS_SCHEMA);
  const upsert = db.prepare(
    `INSERT INTO image_blobs (task_id, kind, idx, bytes, expires_ms) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (task_id, kind, idx) DO UPDATE SET bytes = excluded.bytes, expires_ms = excluded.expires_ms`,
  );
  return (kind, id, index, bytes, expiresMs) => void upsert.run(id, kind, index, bytes, expiresMs);
}
