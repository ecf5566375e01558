import type { KeyValue } from "./key-value.js";
import { TtlMap } from "./ttl-map.js";

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
  const entries = new TtlMap<unknown>(maxEntries, { order: "write", now });
  return {
    inMemory: true,
    get: (key) => Promise.resolve(entries.get(key)),
    set(key, value, ttlMs) {
      entries.set(key, value, ttlMs);
      return Promise.resolve();
    },
    delete(key) {
      entries.delete(key);
      return Promise.resolve();
    },
  };
}
