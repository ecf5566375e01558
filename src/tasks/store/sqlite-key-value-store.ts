import { EventEmitter } from "node:events";
import type { Database } from "better-sqlite3";
import Keyv, { type KeyvStoreAdapter, type StoredData } from "keyv";
import type { KeyValue } from "../../collections/key-value.js";
import { useKeyvCodec } from "./keyv-codec.js";
import { createSqliteWriteBatch, type SqliteWriteBatch } from "./sqlite-write-batch.js";

/** Options of {@link createSqliteKeyValue}. */
export interface SqliteKeyValueOptions {
  /** Milliseconds since the epoch. Default `Date.now`; tests set it. */
  now?: () => number;
  /**
   * The group commit the writes go through: one per file, shared by its
   * namespaces, flushed before the file closes. Default one of its own.
   */
  batch?: SqliteWriteBatch;
}

/**
 * The SQLite store's key-value entries of one namespace: read and deleted
 * through Keyv, written straight to the table as Keyv writes them (the key
 * `<namespace>:<key>`, the text `{"value":…,"expires":…}` through the same
 * codec, the expiry in its column), so that either way reads what the other
 * wrote, an older release included. Keyv's `set` (its hooks, its promise
 * chain, its serializer call) cost more than the row on every
 * `/v1/responses` answer, which records the response's owner; the rows of
 * one turn of the event loop are committed together ({@link SqliteWriteBatch}).
 */
export function createSqliteKeyValue(
  db: Database,
  namespace: string,
  options: SqliteKeyValueOptions = {},
): KeyValue {
  const now = options.now ?? Date.now;
  const adapter = createSqliteKeyValueStore(db, now);
  const batch = options.batch ?? createSqliteWriteBatch(db, adapter.write);
  const keyv = new Keyv({ store: adapter, namespace, throwOnErrors: true });
  keyv.on("error", () => undefined); // thrown to the caller as well
  // Keyv's format at native JSON's cost.
  const codec = useKeyvCodec(keyv);
  const prefix = `${namespace}:`;
  const full = (key: string) => (key.startsWith(prefix) ? key : prefix + key);
  return {
    async get(key) {
      const queued = batch.pending(full(key));
      if (!queued) return keyv.get(key) as Promise<unknown>;
      if (queued.expiresMs !== null && queued.expiresMs <= now()) return undefined;
      return codec.deserialize<{ value?: unknown }>(queued.text).value;
    },
    async delete(key) {
      batch.drop(full(key));
      await keyv.delete(key);
    },
    // Async, resolved once committed: a failed write (a full disk) or a value that does not
    // serialize rejects, and never throws at the caller.
    async set(key, value, ttlMs) {
      // As Keyv: no time to live (0 or none) is no expiry.
      const expires = ttlMs > 0 ? now() + ttlMs : undefined;
      const text = codec.serialize({ value, expires });
      return batch.write(full(key), text, expires ?? null);
    },
  };
}

/**
 * A Keyv storage adapter on the SQLite store's `key_values` table: small
 * entries that live as long as the store (the Responses owners), with their
 * expiry in a column, so that the store's sweep deletes them and a read never
 * sees one past it. Keyv serializes values and prefixes keys with its namespace.
 */
export function createSqliteKeyValueStore(
  db: Database,
  now: () => number,
): KeyvStoreAdapter & { write(key: string, text: string, expiresMs: number | null): void } {
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
    /** A row written as it is: the key with its namespace, the text serialized. */
    write(key: string, text: string, expiresMs: number | null) {
      upsert.run(key, text, expiresMs);
    },
    async delete(key: string) {
      return remove.run(key).changes > 0;
    },
    async clear() {
      const prefix = adapter.namespace ? `${adapter.namespace}:` : "";
      clearAll.run(`${prefix.replace(/[\\%_]/g, "\\$&")}%`);
    },
  });
  return adapter as unknown as KeyvStoreAdapter & typeof adapter;
}
