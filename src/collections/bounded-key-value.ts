import type { KeyValue } from "./key-value.js";
import { OldestKeyCursor } from "./oldest-key-cursor.js";

interface Entry {
  value: unknown;
  expiresAt: number;
}

/**
 * A {@link KeyValue} in this process's memory, at most `maxEntries` entries:
 * past that the oldest written goes first (an entry written again keeps its
 * place), as an expired one is dropped only when it is read. Values are kept
 * as given, not copied: a caller must not change one it set. A Map, not
 * Keyv: Keyv's set cost about 7 µs on every `/v1/responses` answer (its
 * value serialized to JSON and back), a Map's well under one.
 * @param now milliseconds since the epoch (default `Date.now`), for tests
 */
export function createBoundedKeyValue(maxEntries: number, now = Date.now): KeyValue {
  const entries = new Map<string, Entry>();
  const oldest = new OldestKeyCursor(entries);
  const read = (key: string): unknown => {
    const entry = entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt > now()) return entry.value;
    entries.delete(key);
    return undefined;
  };
  return {
    get: (key) => Promise.resolve(read(key)),
    set(key, value, ttlMs) {
      if (entries.size >= maxEntries && !entries.has(key)) oldest.evictOldest();
      entries.set(key, { value, expiresAt: now() + ttlMs });
      return Promise.resolve();
    },
    delete(key) {
      entries.delete(key);
      return Promise.resolve();
    },
  };
}
