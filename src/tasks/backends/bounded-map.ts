/**
 * A Map that forgets its oldest entries past `maxEntries`: Keyv drops an
 * expired entry only when it is read, so a process-memory Keyv under steady
 * traffic must be bounded some other way.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly maxEntries: number) {
    super();
  }

  override set(key: K, value: V): this {
    if (!this.has(key) && this.size >= this.maxEntries) {
      const oldest = this.keys().next();
      if (!oldest.done) this.delete(oldest.value);
    }
    return super.set(key, value);
  }
}
