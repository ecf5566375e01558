import { describe, expect, it } from "vitest";
import { OldestKeyCursor } from "../../src/collections/oldest-key-cursor.js";

describe("OldestKeyCursor", () => {
  it("deletes entries in the order they came, past deleted, moved and cleared ones", () => {
    const map = new Map<string, number>();
    const oldest = new OldestKeyCursor(map);
    expect(oldest.evictOldest()).toBe(false); // empty
    for (const key of ["a", "b", "c", "d"]) map.set(key, 1);
    expect(oldest.evictOldest()).toBe(true);
    expect([...map.keys()]).toEqual(["b", "c", "d"]);
    map.delete("c");
    map.delete("b");
    map.set("b", 2); // moved to the end
    oldest.evictOldest();
    expect([...map.keys()]).toEqual(["b"]);
    oldest.evictOldest();
    expect(map.size).toBe(0);
    expect(oldest.evictOldest()).toBe(false);
    map.set("e", 1); // after the cursor ran out
    map.set("f", 1);
    oldest.evictOldest();
    expect([...map.keys()]).toEqual(["f"]);
    map.clear();
    map.set("g", 1);
    map.set("h", 1);
    oldest.evictOldest();
    expect([...map.keys()]).toEqual(["h"]);
  });
});
