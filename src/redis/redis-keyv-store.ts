import type { RedisClient } from "./redis-client.js";

/**
 * A Keyv store on the service's Redis client: the entries Keyv writes
 * (`{"value": ..., "expires": ...}`) with a native TTL, each under the key
 * `keyOf` names (`RedisKeyValueKeys.key`: the keys `@keyv/redis` wrote in
 * earlier releases, so entries written before an upgrade are read after it).
 * Errors reach the caller (503 `store_unavailable`), never become "not found".
 */
export class RedisKeyvStore {
  /** Set by Keyv from its own `namespace` (already in `keyOf`'s keys). */
  namespace: string | undefined;

  constructor(
    private readonly client: RedisClient,
    private readonly keyOf: (key: string) => string,
  ) {}

  async get(key: string): Promise<string | undefined> {
    return (await this.client.get(this.keyOf(key))) ?? undefined;
  }

  async set(key: string, value: string, ttl?: number): Promise<boolean> {
    if (typeof ttl === "number" && ttl > 0)
      await this.client.set(this.keyOf(key), value, "PX", ttl);
    else await this.client.set(this.keyOf(key), value);
    return true;
  }

  async delete(key: string): Promise<boolean> {
    return (await this.client.del(this.keyOf(key))) > 0;
  }

  /** Never called by the service: entries expire by themselves. */
  async clear(): Promise<void> {}

  on(): this {
    return this;
  }
}
