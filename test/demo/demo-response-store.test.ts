import { describe, expect, it } from "vitest";
import {
  createDemoResponseStore,
  type StoredResponse,
} from "../../src/demo/demo-response-store.js";

const entry = (bytes: number, timer?: NodeJS.Timeout): StoredResponse => ({
  response: {},
  inputItems: [],
  bytes,
  timer,
});

describe("demo response store", () => {
  it("drops the oldest beyond maxEntries", () => {
    const store = createDemoResponseStore({ maxEntries: 2 });
    store.set("a", entry(1));
    store.set("b", entry(1));
    store.set("c", entry(1));
    expect([store.get("a"), store.get("b"), store.get("c")].map(Boolean)).toEqual([
      false,
      true,
      true,
    ]);
  });

  it("drops the oldest beyond maxBytes, but always keeps the newest", () => {
    const store = createDemoResponseStore({ maxBytes: 100 });
    store.set("a", entry(60));
    store.set("b", entry(30));
    expect(store.get("a")).toBeDefined();
    store.set("c", entry(30));
    expect(store.get("a")).toBeUndefined();
    expect(store.get("b")).toBeDefined();
    store.set("huge", entry(1000));
    expect(store.get("b")).toBeUndefined();
    expect(store.get("c")).toBeUndefined();
    expect(store.get("huge")).toBeDefined();
    // Replacing an entry counts its bytes once.
    store.set("huge", entry(10));
    store.set("d", entry(80));
    expect(store.get("huge")).toBeDefined();
  });

  it("stops a pending background finish when an entry is deleted, evicted or cleared", async () => {
    const store = createDemoResponseStore({ maxEntries: 1 });
    let fired = 0;
    const later = () => setTimeout(() => fired++, 20);
    store.set("a", entry(1, later()));
    store.set("b", entry(1, later())); // evicts a
    store.set("c", entry(1));
    expect(store.delete("c")).toBe(true);
    expect(store.delete("c")).toBe(false);
    store.set("d", entry(1, later()));
    store.clear();
    expect(store.get("d")).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(fired).toBe(0);
  });
});
