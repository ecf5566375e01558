import type { Database } from "better-sqlite3";
import type { TaskStore } from "../core/task-store.js";

/**
 * Image bytes (results and edit inputs) in the SQLite store, apart from the
 * task tables so that the piece goes whole once an image store keeps them:
 * one table of blobs, each with its own expiry.
 */
export const IMAGE_BLOBS_SCHEMA = `
CREATE TABLE IF NOT EXISTS image_blobs (
  task_id TEXT NOT NULL,
  kind TEXT NOT NULL,               -- 'image' (a result) or 'input' (an edit's)
  idx INTEGER NOT NULL,
  bytes BLOB NOT NULL,
  expires_ms INTEGER NOT NULL,
  PRIMARY KEY (task_id, kind, idx)
);
CREATE INDEX IF NOT EXISTS image_blobs_expiring ON image_blobs (expires_ms);
`;

type BlobKind = "image" | "input";

/** The byte methods of {@link TaskStore}, and what the task steps need of them. */
export type ImageBlobs = Pick<
  TaskStore,
  "putImage" | "getImage" | "deleteImages" | "putInput" | "getInput" | "deleteInputs"
> & {
  /** Writes one blob; synchronous, so a caller's transaction (the migration) may hold it. */
  put(kind: BlobKind, id: string, index: number, bytes: Buffer, expiresMs: number): void;
  /** Deletes a task's input images, inside the transition that finishes it. */
  dropInputs(id: string): void;
  /** Deletes at most `limit` expired blobs; resolves how many. */
  sweep(nowMs: number, limit: number): number;
};

/** {@link ImageBlobs} on `db`, creating its table when missing. */
export function createImageBlobs(db: Database, now: () => number): ImageBlobs {
  db.exec(IMAGE_BLOBS_SCHEMA);
  const upsert = db.prepare(
    `INSERT INTO image_blobs (task_id, kind, idx, bytes, expires_ms) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (task_id, kind, idx) DO UPDATE SET bytes = excluded.bytes, expires_ms = excluded.expires_ms`,
  );
  const select = db
    .prepare(
      "SELECT bytes FROM image_blobs WHERE task_id = ? AND kind = ? AND idx = ? AND expires_ms > ?",
    )
    .pluck();
  const deleteBelow = db.prepare(
    "DELETE FROM image_blobs WHERE task_id = ? AND kind = ? AND idx < ?",
  );
  const deleteKind = db.prepare("DELETE FROM image_blobs WHERE task_id = ? AND kind = ?");
  const deleteExpired = db.prepare(
    `DELETE FROM image_blobs WHERE rowid IN
       (SELECT rowid FROM image_blobs WHERE expires_ms <= ? ORDER BY expires_ms LIMIT ?)`,
  );

  const put = (kind: BlobKind, id: string, index: number, bytes: Buffer, expiresMs: number) => {
    upsert.run(id, kind, index, bytes, expiresMs);
  };
  const get = (kind: BlobKind, id: string, index: number) =>
    (select.get(id, kind, index, now()) as Buffer | undefined) ?? undefined;

  return {
    put,
    dropInputs: (id) => void deleteKind.run(id, "input"),
    sweep: (nowMs, limit) => deleteExpired.run(nowMs, limit).changes,
    async putImage(id, index, bytes, ttlMs) {
      put("image", id, index, bytes, now() + ttlMs);
    },
    async getImage(id, index) {
      return get("image", id, index);
    },
    async deleteImages(id, count) {
      deleteBelow.run(id, "image", count);
    },
    async putInput(id, index, bytes, ttlMs) {
      put("input", id, index, bytes, now() + ttlMs);
    },
    async getInput(id, index) {
      return get("input", id, index);
    },
    async deleteInputs(id, count) {
      deleteBelow.run(id, "input", count);
    },
  };
}
