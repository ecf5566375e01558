import type { TaskRecord } from "../core/task-record.js";

/** The largest answer kept: a task of small images, or of links (a few hundred bytes). */
const MAX_ENTRY_BYTES = 16 * 1024;
/** All answers kept, at most: a poll of a task not kept costs what it did before. */
const MAX_TOTAL_BYTES = 2 * 1024 * 1024;
/** Entries kept, at most (answers of links are small: this binds first). */
const MAX_ENTRIES = 4096;
/**
 * How long an answer is sent again. A presigned link of a task kept longer
 * than SigV4's 7 days is signed the hour it is asked for (see
 * `image-links.ts`): an answer kept for ever would hand out an old one.
 */
const MAX_AGE_MS = 10 * 60 * 1000;

/** One answer kept: its JSON, and what it was made from. */
interface Entry {
  /** What the answer depends on besides the record: the origin of its links, `?links`. */
  variant: string;
  status: TaskRecord["status"];
  owner: string;
  attempts: number;
  completedAt: number | undefined;
  expiresAt: number | undefined;
  firstKey: string | undefined;
  body: string;
  bytes: number;
  /** When it was made (`Date.now()`): kept at most {@link MAX_AGE_MS}. */
  madeAt: number;
  /** The answer's headers (`Content-Type`, `Content-Length`). */
  headers: Record<string, string | number>;
}

/**
 * The JSON answers of finished tasks, as a poll sends them in one write: a
 * finished task no longer changes, so its answer is made once (presented,
 * its small images read and encoded, stringified) and sent again as it is.
 *
 * Only answers read after the store was: a task deleted or expired is never
 * found, so never answered from here. An entry is used only for the same
 * run of the same finished task (status, attempt, completion, expiry, first
 * image key) and the same variant (origin, `?links`), for at most ten
 * minutes; it is replaced otherwise. Bounded: small answers only, and the oldest go first.
 */
export class FinishedViews {
  private readonly entries = new Map<string, Entry>();
  private total = 0;

  /** The answer kept for `record` in `variant`, if it is still the one to send. */
  get(record: TaskRecord, variant: string): Entry | undefined {
    const entry = this.entries.get(record.id);
    if (
      entry === undefined ||
      entry.variant !== variant ||
      entry.status !== record.status ||
      entry.owner !== record.owner ||
      entry.attempts !== record.attempts ||
      entry.completedAt !== record.completed_at ||
      entry.expiresAt !== record.expires_at ||
      entry.firstKey !== record.images?.[0]?.key ||
      Date.now() - entry.madeAt > MAX_AGE_MS
    ) {
      return undefined;
    }
    return entry;
  }

  /** Keeps the answer made for finished `record` in `variant` (when small enough). */
  set(record: TaskRecord, variant: string, body: string): void {
    const bytes = Buffer.byteLength(body);
    if (bytes > MAX_ENTRY_BYTES) return;
    this.forget(record.id);
    this.entries.set(record.id, {
      variant,
      status: record.status,
      owner: record.owner,
      attempts: record.attempts,
      completedAt: record.completed_at,
      expiresAt: record.expires_at,
      firstKey: record.images?.[0]?.key,
      body,
      bytes,
      madeAt: Date.now(),
      headers: { "Content-Type": "application/json; charset=utf-8", "Content-Length": bytes },
    });
    this.total += bytes;
    for (const id of this.entries.keys()) {
      if (this.total <= MAX_TOTAL_BYTES && this.entries.size <= MAX_ENTRIES) break;
      this.forget(id);
    }
  }

  /** Drops the answer kept for task `id` (deleted: its memory is of no more use). */
  forget(id: string): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.entries.delete(id);
    this.total -= entry.bytes;
  }
}
