import { OldestKeyCursor } from "../../collections/oldest-key-cursor.js";

/**
 * A Map that forgets its oldest entries past `maxEntries`: Keyv drops an
 * expired entry only when it is read, so a process-memory Keyv under steady
 * traffic must be bounded some other way.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  readonly #oldest = new OldestKeyCursor<K>(this);

  constructor(private readonly maxEntries: number) {
    super();
  }

  override set(key: K, value: V): this {
    if (this.size >= this.maxEntries && !this.has(key)) this.#oldest.evictOldest();
    return super.set(key, value);
  }
}
