import Keyv from "keyv";
import { describe, expect, it } from "vitest";
import { createBoundedKeyValue } from "../../src/collections/bounded-key-value.js";
import { createResponseOwners } from "../../src/proxy/response-owners.js";
import { keyvKeyValue } from "../../src/tasks/backends/keyv-key-value.js";

describe.each([
  { name: "on a Keyv (the Redis and SQLite stores')", open: () => keyvKeyValue(new Keyv()) },
  { name: "in this process's memory", open: () => createBoundedKeyValue(20_000) },
])("ResponseOwners $name", ({ open }) => {
  it("remembers, looks up and forgets who created a response, and on which channel", async () => {
    const owners = createResponseOwners(open(), 60_000);
    await owners.remember("resp_1", { channel: "primary", owner: "key:abc" });
    expect(await owners.lookup("resp_1")).toEqual({ channel: "primary", owner: "key:abc" });
    expect(await owners.lookup("resp_2")).toBeUndefined();
    await owners.forget("resp_1");
    expect(await owners.lookup("resp_1")).toBeUndefined();
  });

  it("keeps each response's own owner among many keys and channels", async () => {
    const owners = createResponseOwners(open(), 60_000);
    // Past the 4,096 owners a channel shares in memory, so some are made anew.
    const keys = 5_000;
    for (let i = 0; i < keys; i += 1) {
      for (const channel of ["primary", "backup"]) {
        await owners.remember(`resp_${channel}_${i}`, { channel, owner: `key:${i % 4_500}` });
      }
    }
    for (const i of [0, 1, 4_095, 4_096, 4_499, 4_500, 4_999]) {
      for (const channel of ["primary", "backup"]) {
        const found = await owners.lookup(`resp_${channel}_${i}`);
        expect(found).toEqual({ channel, owner: `key:${i % 4_500}` });
      }
    }
    // What a caller gets is its own: changing it changes no other response's owner.
    const first = await owners.lookup("resp_primary_0");
    if (first) first.owner = "key:someone-else";
    expect(await owners.lookup("resp_primary_4500")).toEqual({
      channel: "primary",
      owner: "key:0",
    });
  });

  it("forgets entries after their time to live", async () => {
    const owners = createResponseOwners(open(), 20);
    await owners.remember("resp_1", { channel: "primary", owner: "key:abc" });
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(await owners.lookup("resp_1")).toBeUndefined();
  });
});

describe("the bounded key-value entries of a process's memory", () => {
  /** The keys among `keys` that are still there. */
  const present = async (entries: ReturnType<typeof createBoundedKeyValue>, keys: string[]) => {
    const found: string[] = [];
    for (const key of keys) if ((await entries.get(key)) !== undefined) found.push(key);
    return found;
  };

  it("keeps a bounded number, the oldest forgotten first", async () => {
    const owners = createResponseOwners(createBoundedKeyValue(2), 60_000);
    for (const id of ["a", "b", "c"]) await owners.remember(id, { channel: "x", owner: id });
    expect(await owners.lookup("a")).toBeUndefined();
    expect(await owners.lookup("b")).toEqual({ channel: "x", owner: "b" });
    expect(await owners.lookup("c")).toEqual({ channel: "x", owner: "c" });
  });

  it("forgets in the order entries came, also after some were deleted or written again", async () => {
    const entries = createBoundedKeyValue(3);
    for (const key of ["a", "b", "c"]) await entries.set(key, 1, 60_000);
    await entries.delete("b");
    await entries.set("d", 1, 60_000); // room left by b: nothing forgotten
    await entries.set("e", 1, 60_000); // a goes
    await entries.set("c", 2, 60_000); // written again: keeps its place, nothing forgotten
    expect(await present(entries, ["a", "b", "c", "d", "e"])).toEqual(["c", "d", "e"]);
    expect(await entries.get("c")).toBe(2);
    await entries.set("f", 1, 60_000); // c goes
    expect(await present(entries, ["c", "d", "e", "f"])).toEqual(["d", "e", "f"]);

    const many = createBoundedKeyValue(3);
    for (let i = 0; i < 1_000; i += 1) {
      await many.set(`k${i}`, i, 60_000);
      if (i % 7 === 0) await many.delete(`k${i - 2}`);
    }
    expect(await present(many, ["k995", "k996", "k997", "k998", "k999"])).toEqual([
      "k997",
      "k998",
      "k999",
    ]);
  });

  it("drops an entry once its time to live is over, by the clock it was given", async () => {
    let now = 1_000;
    const entries = createBoundedKeyValue(10, () => now);
    await entries.set("a", { channel: "x" }, 500);
    now = 1_499;
    expect(await entries.get("a")).toEqual({ channel: "x" });
    now = 1_500;
    expect(await entries.get("a")).toBeUndefined();
  });
});
