import type Keyv from "keyv";
import type { KeyValue } from "../../collections/key-value.js";

/** A {@link KeyValue} on a Keyv (the Redis and SQLite stores' own), its errors the caller's. */
export function keyvKeyValue(keyv: Keyv): KeyValue {
  return {
    get: (key) => keyv.get(key) as Promise<unknown>,
    async set(key, value, ttlMs) {
      await keyv.set(key, value, ttlMs);
    },
    async delete(key) {
      await keyv.delete(key);
    },
  };
}
