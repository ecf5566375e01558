import { OldestKeyCursor } from "../collections/oldest-key-cursor.js";

/**
 * A map with a size bound and per-entry expiry. Past `maxEntries` the least
 * recently used entry goes, so keys an attacker makes up cannot grow memory
 * without limit; an expired entry is dropped when it is next looked up.
 */
export class TtlLruCache<V> {
  readonly #entries = new Map<string, { value: V; expiresAt: number }>();
  /** Least recently used first: every use moves an entry to the end. */
  readonly #oldest = new OldestKeyCursor(this.#entries);

  constructor(
    private readonly maxEntries: number,
    private readonly now: () => number,
  ) {}

  get size(): number {
    return this.#entries.size;
  }

  /** The live value for `key`, made the most recently used; `undefined` if absent or expired. */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    this.#entries.delete(key);
    if (entry.expiresAt <= this.now()) return undefined;
    // Re-inserted: a Map iterates in insertion order, so the first entry is the least recent.
    this.#entries.set(key, entry);
    return entry.value;
  }

  /** Keeps `value` for `ttlMs`, dropping the least recently used entry when full. */
  set(key: string, value: V, ttlMs: number): void {
    this.#entries.delete(key);
    this.#entries.set(key, { value, expiresAt: this.now() + ttlMs });
    while (this.#entries.size > this.maxEntries) this.#oldest.evictOldest();
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }
}
