import { describe, expect, it } from "vitest";
import { TtlMap, type EvictionOrder } from "../../src/collections/ttl-map.js";

/*
 * Bounded maps with expiry: by use, the forward mode's caches of checked keys
 * (the least recently used forgotten first); by write, the memory store's
 * small entries (the oldest written first). An expired entry is never answered.
 */
/** A deterministic stream of numbers in (0, 1) (Park and Miller's generator). */
function seeded(seed: number): () => number {
  let state = seed;
  return () => (state = (state * 48271) % 2147483647) / 2147483647;
}

/**
 * 20,000 steps of new keys, hits and deletes on a TtlMap of 50 entries, each
 * checked against a plain list in eviction order (first out first): by use, a
 * read or a write moves a key to the end; by write, only a key's first write
 * places it. Resolves the map and the list after the run.
 */
function runBesideList(order: EvictionOrder, seed: number) {
  const map = new TtlMap<number>(50, { order, now: () => 0 });
  const list: string[] = [];
  const remove = (key: string) => {
    const at = list.indexOf(key);
    if (at !== -1) list.splice(at, 1);
  };
  const place = (key: string) => {
    if (order === "use") remove(key);
    if (!list.includes(key)) list.push(key);
  };
  const random = seeded(seed);
  for (let step = 0; step < 20_000; step += 1) {
    const key = `k${Math.floor(random() * 120)}`;
    const roll = random();
    if (roll < 0.45) {
      map.set(key, step, 1_000);
      place(key);
      if (list.length > 50) list.shift();
    } else if (roll < 0.9) {
      const hit = map.get(key) !== undefined;
      expect(hit).toBe(list.includes(key));
      if (hit && order === "use") place(key);
    } else {
      map.delete(key);
      remove(key);
    }
  }
  return { map, list };
}

describe("TtlMap by use", () => {
  it("forgets the least recently used entry past its bound", () => {
    const cache = new TtlMap<number>(3, { order: "use", now: () => 0 });
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
    const { map, list } = runBesideList("use", 7);
    expect(map.size).toBe(list.length);
    for (const key of list) expect(map.get(key)).toBeDefined();
  });

  it("answers nothing for an expired entry", () => {
    let now = 0;
    const cache = new TtlMap<string>(10, { order: "use", now: () => now });
    cache.set("key", "value", 100);
    now = 99;
    expect(cache.get("key")).toBe("value");
    now = 200;
    expect(cache.get("key")).toBeUndefined();
  });
});

describe("TtlMap by write", () => {
  it("forgets the oldest written entry past its bound, whatever was read since", () => {
    const map = new TtlMap<number>(3, { order: "write", now: () => 0 });
    for (const key of ["a", "b", "c"]) map.set(key, 1, 1_000);
    expect(map.get("a")).toBe(1); // a read does not move it
    map.set("b", 2, 1_000); // nor does a write of a key already there
    map.set("d", 1, 1_000);
    expect(map.get("a")).toBeUndefined();
    map.set("e", 1, 1_000);
    expect(map.get("b")).toBeUndefined();
    expect([map.get("c"), map.get("d"), map.get("e")]).toEqual([1, 1, 1]);
    expect(map.size).toBe(3);
  });

  it("keeps the same entries as a plain first-written list over a long mixed run", () => {
    const { map, list } = runBesideList("write", 11);
    expect(map.size).toBe(list.length);
  });

  it("answers nothing for an expired entry, and drops it", () => {
    let now = 0;
    const map = new TtlMap<string>(10, { order: "write", now: () => now });
    map.set("key", "value", 100);
    now = 100;
    expect(map.get("key")).toBeUndefined();
    expect(map.size).toBe(0);
  });
});
