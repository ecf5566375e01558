import { describe, expect, it } from "vitest";
import { cleanKey, createKeyStore } from "../../console/src/key-store.js";
import {
  firstPage,
  listQuery,
  nextPage,
  pageNumber,
  previousPage,
} from "../../console/src/paging.js";
import { parseRoute, routeHash } from "../../console/src/routes.js";

describe("gallery paging", () => {
  it("walks forward by the last id and back by the cursors that led there", () => {
    const first = firstPage("completed");
    expect(listQuery(first, 10)).toEqual({ limit: 10, status: "completed" });
    const second = nextPage(first, { has_more: true, last_id: "task_10" });
    const third = nextPage(second, { has_more: true, last_id: "task_20" });
    expect(listQuery(third, 10)).toEqual({ limit: 10, after: "task_20", status: "completed" });
    expect(pageNumber(third)).toBe(3);
    // The last page has no next.
    expect(nextPage(third, { has_more: false, last_id: "task_25" })).toBe(third);
    const back = previousPage(third);
    expect(listQuery(back, 10)).toEqual({ limit: 10, after: "task_10", status: "completed" });
    const start = previousPage(back);
    expect(listQuery(start, 10)).toEqual({ limit: 10, status: "completed" });
    expect(previousPage(start)).toBe(start);
    expect(listQuery(firstPage(), 5)).toEqual({ limit: 5 });
  });
});

describe("routes", () => {
  it("reads the page from the URL's # part, a task only by a well-formed id", () => {
    const id = "task_AAAAAAAAAAAAAAAAAAAAAA";
    expect(parseRoute(`#/tasks/${id}`)).toEqual({ name: "task", id });
    expect(parseRoute("#/gallery")).toEqual({ name: "gallery" });
    expect(parseRoute("")).toEqual({ name: "create" });
    expect(parseRoute("#/tasks/<img src=x>")).toEqual({ name: "create" });
    expect(parseRoute("#/tasks/task_short")).toEqual({ name: "create" });
    for (const route of [{ name: "task", id }, { name: "gallery" }, { name: "create" }] as const) {
      expect(parseRoute(routeHash(route))).toEqual(route);
    }
  });
});

describe("the key store", () => {
  it("keeps the key in the storage it is given, and forgets it on sign-out", () => {
    const items = new Map<string, string>();
    const storage = {
      getItem: (name: string) => items.get(name) ?? null,
      setItem: (name: string, value: string) => void items.set(name, value),
      removeItem: (name: string) => void items.delete(name),
    };
    const keys = createKeyStore(storage);
    expect(keys.get()).toBeUndefined();
    keys.set("sk-1");
    expect(keys.get()).toBe("sk-1");
    expect([...items.values()]).toEqual(["sk-1"]);
    keys.clear();
    expect(items.size).toBe(0);
  });

  it("survives a storage that refuses", () => {
    const refusing = {
      getItem: () => {
        throw new Error("denied");
      },
      setItem: () => {
        throw new Error("denied");
      },
      removeItem: () => {
        throw new Error("denied");
      },
    };
    const keys = createKeyStore(refusing);
    expect(() => keys.set("sk-1")).not.toThrow();
    expect(keys.get()).toBeUndefined();
    expect(() => keys.clear()).not.toThrow();
  });

  it("takes a key as pasted, with blanks or a Bearer prefix", () => {
    expect(cleanKey("  Bearer sk-demo \n")).toBe("sk-demo");
    expect(cleanKey("sk-demo")).toBe("sk-demo");
  });
});
