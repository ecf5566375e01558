import { Readable } from "node:stream";
import { checkKey } from "./image-keys.js";
import type { ImageStore } from "./image-store.js";

interface Held {
  bytes: Buffer;
  contentType: string;
  etag: string;
}

/**
 * Images in this process's memory (`memory://`): for the memory task store,
 * whose tasks are lost with the process anyway, and for tests.
 */
export function createMemoryImageStore(): ImageStore {
  const objects = new Map<string, Held>();
  // The ETag names the put, not the bytes: an MD5 of a real-size image cost more than its copy,
  // and no other process (replica) has to agree on it.
  const started = Date.now().toString(36);
  let puts = 0;
  return {
    backend: "memory",

    async put(key, bytes, contentType) {
      checkKey(key);
      // An exact-size copy: a small Buffer may be a slice of a shared pool, which it would keep alive.
      const copy = Buffer.allocUnsafeSlow(bytes.byteLength);
      bytes.copy(copy);
      puts += 1;
      const etag = `"${started}-${puts.toString(36)}-${copy.byteLength.toString(16)}"`;
      objects.set(key, { bytes: copy, contentType, etag });
    },

    async get(key) {
      const held = objects.get(checkKey(key));
      if (!held) return undefined;
      return {
        body: Readable.from([held.bytes]),
        bytes: held.bytes,
        size: held.bytes.byteLength,
        contentType: held.contentType,
        etag: held.etag,
      };
    },

    async delete(keys) {
      for (const key of keys) objects.delete(checkKey(key));
    },

    async *list(prefix) {
      const keys = [...objects.keys()].filter((key) => key.startsWith(prefix)).sort();
      for (const key of keys) {
        const held = objects.get(key);
        if (held) yield { key, size: held.bytes.byteLength };
      }
    },

    async ping() {},

    async check() {},

    objectKey: (key) => key,

    async close() {
      objects.clear();
    },
  };
}
