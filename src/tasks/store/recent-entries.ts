import { OldestKeyCursor } from "../../collections/oldest-key-cursor.js";

/** How many entries {@link createRecentEntries} keeps by default (about 1 KB each). */
const DEFAULT_LIMIT = 1_000;

/** The entries of unfinished tasks this process read or wrote last, as the text stored. */
export interface RecentEntries {
  /** The text last seen for task `id`, if kept. */
  get(id: string): string | undefined;
  /** Keeps `text` as task `id`'s latest entry (the oldest kept goes past the limit). */
  keep(id: string, text: string): void;
  /** Forgets task `id` (finished, deleted, or found changed). */
  drop(id: string): void;
}

/**
 * A bounded memory of the Redis store's latest entry per unfinished task, so
 * that a transition starts from the record its process read or wrote last
 * instead of reading it again: a run reads its task once, then moves it to
 * `in_progress` and to its end without a `GET` before each write. The
 * transition's compare-and-set on `rev` still decides: an entry another
 * process changed meanwhile fails it, and the record is read then. Kept as
 * the stored text, parsed at each use, so that no caller's object is shared
 * with what a later transition starts from.
 */
export function createRecentEntries(limit = DEFAULT_LIMIT): RecentEntries {
  const entries = new Map<string, string>();
  const oldest = new OldestKeyCursor(entries);
  return {
    get: (id) => entries.get(id),
    keep(id, text) {
      // Re-inserted: the map's order is the order of last use, the oldest first.
      entries.delete(id);
      entries.set(id, text);
      if (entries.size > limit) oldest.evictOldest();
    },
    drop(id) {
      entries.delete(id);
    },
  };
}
