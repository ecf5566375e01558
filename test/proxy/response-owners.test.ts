import Keyv from "keyv";
import { describe, expect, it } from "vitest";
import { createResponseOwners } from "../../src/proxy/response-owners.js";
import { BoundedMap } from "../../src/tasks/backends/bounded-map.js";

describe("ResponseOwners on a Keyv", () => {
  it("remembers, looks up and forgets who created a response, and on which channel", async () => {
    const owners = createResponseOwners(new Keyv(), 60_000);
    await owners.remember("resp_1", { channel: "primary", owner: "key:abc" });
    expect(await owners.lookup("resp_1")).toEqual({ channel: "primary", owner: "key:abc" });
    expect(await owners.lookup("resp_2")).toBeUndefined();
    await owners.forget("resp_1");
    expect(await owners.lookup("resp_1")).toBeUndefined();
  });

  it("forgets entries after their time to live", async () => {
    const owners = createResponseOwners(new Keyv(), 20);
    await owners.remember("resp_1", { channel: "primary", owner: "key:abc" });
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(await owners.lookup("resp_1")).toBeUndefined();
  });

  it("keeps a bounded number in a process's memory, the oldest forgotten first", async () => {
    const map = new BoundedMap<string, unknown>(2);
    const owners = createResponseOwners(new Keyv({ store: map }), 60_000);
    for (const id of ["a", "b", "c"]) await owners.remember(id, { channel: "x", owner: id });
    expect(map.size).toBe(2);
    expect(await owners.lookup("a")).toBeUndefined();
    expect(await owners.lookup("c")).toEqual({ channel: "x", owner: "c" });
  });

  it("forgets in the order entries came, also after some were deleted or written again", () => {
    const map = new BoundedMap<string, number>(3);
    for (const key of ["a", "b", "c"]) map.set(key, 1);
    map.delete("b");
    map.set("d", 1); // room left by b: nothing forgotten
    map.set("e", 1); // a goes
    map.set("c", 2); // written again: keeps its place, nothing forgotten
    expect([...map.keys()]).toEqual(["c", "d", "e"]);
    map.set("f", 1); // c goes
    expect([...map.keys()]).toEqual(["d", "e", "f"]);
    map.clear();
    for (let i = 0; i < 1_000; i += 1) {
      map.set(`k${i}`, i);
      if (i % 7 === 0) map.delete(`k${i - 2}`);
    }
    expect([...map.keys()]).toEqual(["k997", "k998", "k999"]);
  });
});
