import { OldestKeyCursor } from "./oldest-key-cursor.js";

/** Which entry a full {@link TtlMap} forgets first. */
export type EvictionOrder =
  /** The least recently used: a read or a write moves an entry to the end. */
  | "use"
  /** The oldest written: an entry written again keeps its place, a read does not move it. */
  | "write";

/** Options of {@link TtlMap}. */
export interface TtlMapOptions {
  /** Which entry goes first past `maxEntries`. */
  order: EvictionOrder;
  /** Milliseconds since the epoch. Default `Date.now` (tests pass their own). */
  now?: () => number;
}

/**
 * A map in this process's memory with a size bound and an expiry per entry:
 * past `maxEntries` the first entry in `order` goes, so that keys a client
 * makes up cannot grow memory without limit; an expired entry is dropped when
 * it is next read. Values are kept as given, not copied: a caller must not
 * change one it set. A Map whose insertion order is the eviction order, and
 * {@link OldestKeyCursor} to evict: each eviction steps over deleted slots once.
 */
export class TtlMap<V> {
  readonly #entries = new Map<string, { value: V; expiresAt: number }>();
  readonly #oldest = new OldestKeyCursor(this.#entries);
  readonly #byUse: boolean;
  readonly #now: () => number;

  constructor(
    private readonly maxEntries: number,
    options: TtlMapOptions,
  ) {
    this.#byUse = options.order === "use";
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The live value for `key` (made the most recently used, by use); undefined if absent or expired. */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.#now()) {
      this.#entries.delete(key);
      return undefined;
    }
    if (this.#byUse) {
      // Re-inserted: a Map iterates in insertion order, so the first entry is the least recent.
      this.#entries.delete(key);
      this.#entries.set(key, entry);
    }
    return entry.value;
  }

  /** Keeps `value` for `ttlMs`, forgetting the first entry in order when full. */
  set(key: string, value: V, ttlMs: number): void {
    if (this.#byUse) this.#entries.delete(key);
    this.#entries.set(key, { value, expiresAt: this.#now() + ttlMs });
    while (this.#entries.size > this.maxEntries) this.#oldest.evictOldest();
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }
}
