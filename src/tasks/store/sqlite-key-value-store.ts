import { EventEmitter } from "node:events";
import type { Database } from "better-sqlite3";
import type { KeyvStoreAdapter, StoredData } from "keyv";

/**
 * A Keyv storage adapter on the SQLite store's `key_values` table: small
 * entries that live as long as the store (the Responses owners), with their
 * expiry in a column, so that the store's sweep deletes them and a read never
 * sees one past it. Keyv serializes values and prefixes keys with its namespace.
 */
export function createSqliteKeyValueStore(db: Database, now: () => number): KeyvStoreAdapter {
  const select = db
    .prepare(
      "SELECT value FROM key_values WHERE key = ? AND (expires_ms IS NULL OR expires_ms > ?)",
    )
    .pluck();
  const upsert = db.prepare(
    `INSERT INTO key_values (key, value, expires_ms) VALUES (?, ?, ?)
     ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_ms = excluded.expires_ms`,
  );
  const remove = db.prepare("DELETE FROM key_values WHERE key = ?");
  const clearAll = db.prepare("DELETE FROM key_values WHERE key LIKE ? ESCAPE '\\'");

  const adapter = Object.assign(new EventEmitter(), {
    opts: { dialect: "sqlite" },
    namespace: undefined as string | undefined,
    async get<Value>(key: string): Promise<StoredData<Value> | undefined> {
      return (select.get(key, now()) as StoredData<Value> | undefined) ?? undefined;
    },
    async set(key: string, value: unknown, ttl?: number) {
      const expires = typeof ttl === "number" && ttl > 0 ? now() + ttl : null;
      upsert.run(key, value, expires);
    },
    async delete(key: string) {
      return remove.run(key).changes > 0;
    },
    async clear() {
      const prefix = adapter.namespace ? `${adapter.namespace}:` : "";
      clearAll.run(`${prefix.replace(/[\\%_]/g, "\\$&")}%`);
    },
  });
  return adapter as unknown as KeyvStoreAdapter;
}
