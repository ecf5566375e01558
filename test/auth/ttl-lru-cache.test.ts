import { describe, expect, it } from "vitest";
import { TtlLruCache } from "../../src/auth/ttl-lru-cache.js";

/*
 * The forward mode's caches of checked keys: bounded, the least recently used
 * forgotten first, an expired entry never answered.
 */
describe("TtlLruCache", () => {
  it("forgets the least recently used entry past its bound", () => {
    const cache = new TtlLruCache<number>(3, () => 0);
    for (const key of ["a", "b", "c"]) cache.set(key, 1, 1_000);
    cache.get("a"); // b is now the least recently used
    cache.set("d", 1, 1_000);
    expect(cache.get("b")).toBeUndefined();
    cache.get("c"); // a is now the least recently used
    cache.set("e", 1, 1_000);
    expect(cache.get("a")).toBeUndefined();
    expect([cache.get("c"), cache.get("d"), cache.get("e")]).toEqual([1, 1, 1]);
    expect(cache.size).toBe(3);
  });

  it("keeps the same entries as a plain least-recently-used list over a long mixed run", () => {
    const cache = new TtlLruCache<number>(50, () => 0);
    const reference: string[] = []; // least recently used first
    const use = (key: string) => {
      const at = reference.indexOf(key);
      if (at !== -1) reference.splice(at, 1);
      reference.push(key);
    };
    // A deterministic mix of new keys, hits and deletes.
    let seed = 7;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    for (let step = 0; step < 20_000; step += 1) {
      const key = `k${Math.floor(random() * 120)}`;
      const roll = random();
      if (roll < 0.45) {
        cache.set(key, step, 1_000);
        use(key);
        if (reference.length > 50) reference.shift();
      } else if (roll < 0.9) {
        const hit = cache.get(key) !== undefined;
        expect(hit).toBe(reference.includes(key));
        if (hit) use(key);
      } else {
        cache.delete(key);
        const at = reference.indexOf(key);
        if (at !== -1) reference.splice(at, 1);
      }
    }
    expect(cache.size).toBe(reference.length);
    for (const key of reference) expect(cache.get(key)).toBeDefined();
  });

  it("answers nothing for an expired entry", () => {
    let now = 0;
    const cache = new TtlLruCache<string>(10, () => now);
    cache.set("key", "value", 100);
    now = 99;
    expect(cache.get("key")).toBe("value");
    now = 200;
    expect(cache.get("key")).toBeUndefined();
  });
});
