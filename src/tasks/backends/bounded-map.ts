/**
 * A Map that forgets its oldest entries past `maxEntries`: Keyv drops an
 * expired entry only when it is read, so a process-memory Keyv under steady
 * traffic must be bounded some other way.
 */
export class BoundedMap<K, V> extends Map<K, V> {
  /**
   * Where the oldest entry is, kept between evictions. A new iterator for
   * each eviction (`keys().next()`) would step over every entry deleted since
   * V8 last compacted the table, as many as the map holds (about 8 µs an
   * eviction at 10,000 entries); a live iterator steps over each only once.
   */
  private oldest: MapIterator<K> | undefined;

  constructor(private readonly maxEntries: number) {
    super();
  }

  override set(key: K, value: V): this {
    if (this.size >= this.maxEntries && !this.has(key)) this.evictOldest();
    return super.set(key, value);
  }

  private evictOldest(): void {
    let next = this.oldest?.next();
    // A finished iterator stays finished: one made before the map last filled up starts over.
    if (!next || next.done) {
      this.oldest = this.keys();
      next = this.oldest.next();
    }
    if (!next.done) this.delete(next.value);
  }
}
