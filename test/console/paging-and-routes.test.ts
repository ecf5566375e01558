import { describe, expect, it } from "vitest";
import { cleanKey, createKeyStore } from "../../console/src/key-store.js";
import {
  firstPage,
  listQuery,
  nextPage,
  pageNumber,
  previousPage,
  showsNewest,
} from "../../console/src/paging.js";
import { GALLERY, parseRoute, routeHash, type Route } from "../../console/src/routes.js";

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
    // Oldest first: the same walk, the list asked with order=asc.
    const oldest = nextPage(firstPage(undefined, true), { has_more: true, last_id: "task_1" });
    expect(listQuery(oldest, 5)).toEqual({ limit: 5, after: "task_1", order: "asc" });
    expect(listQuery(previousPage(oldest), 5)).toEqual({ limit: 5, order: "asc" });
  });

  it("knows the page a new task lands on: the first newest first, the last oldest first", () => {
    const second = nextPage(firstPage(), { has_more: true, last_id: "task_1" });
    expect(showsNewest(firstPage(), { has_more: true })).toBe(true);
    expect(showsNewest(second, { has_more: false })).toBe(false);
    const oldestFirst = firstPage(undefined, true);
    expect(showsNewest(oldestFirst, { has_more: true })).toBe(false);
    expect(showsNewest(oldestFirst, { has_more: false })).toBe(true);
  });
});

describe("routes", () => {
  const id = "task_AAAAAAAAAAAAAAAAAAAAAA";
  const a = "task_BBBBBBBBBBBBBBBBBBBBBB";
  const b = "task_CCCCCCCCCCCCCCCCCCCCCC";

  it("reads the page from the URL's # part, a task only by a well-formed id", () => {
    expect(parseRoute(`#/tasks/${id}`)).toEqual({ name: "task", id });
    expect(parseRoute("#/gallery")).toEqual({ name: "gallery", paging: firstPage() });
    expect(parseRoute("")).toEqual({ name: "create" });
    expect(parseRoute("#/tasks/<img src=x>")).toEqual({ name: "create" });
    expect(parseRoute("#/tasks/task_short")).toEqual({ name: "create" });
    for (const route of [{ name: "task", id }, GALLERY, { name: "create" }] as const) {
      expect(parseRoute(routeHash(route))).toEqual(route);
    }
  });

  it("keeps the gallery's filter and page in the URL, and the way back to the first page", () => {
    const third = nextPage(nextPage(firstPage("completed"), { has_more: true, last_id: a }), {
      has_more: true,
      last_id: b,
    });
    const hash = routeHash({ name: "gallery", paging: third });
    expect(hash).toBe(`#/gallery?status=completed&after=${b}&trail=${a}`);
    const back = parseRoute(hash);
    expect(back).toEqual({ name: "gallery", paging: third });
    // After a reload, "Newer" goes back page by page to the first.
    const paging = (back as Extract<Route, { name: "gallery" }>).paging;
    expect(listQuery(previousPage(paging), 5)).toEqual({ limit: 5, after: a, status: "completed" });
    expect(pageNumber(previousPage(previousPage(paging)))).toBe(1);
    expect(routeHash({ name: "gallery", paging: firstPage("failed") })).toBe(
      "#/gallery?status=failed",
    );
    // The order too, with the page it is on.
    const oldest = nextPage(firstPage("failed", true), { has_more: true, last_id: a });
    const oldestHash = routeHash({ name: "gallery", paging: oldest });
    expect(oldestHash).toBe(`#/gallery?status=failed&order=asc&after=${a}`);
    expect(parseRoute(oldestHash)).toEqual({ name: "gallery", paging: oldest });
    expect(parseRoute("#/gallery?order=asc")).toEqual({
      name: "gallery",
      paging: firstPage(undefined, true),
    });
  });

  it("takes what holds together of a gallery URL someone wrote", () => {
    const gallery = (hash: string) =>
      (parseRoute(hash) as Extract<Route, { name: "gallery" }>).paging;
    expect(gallery("#/gallery?status=nope&after=x")).toEqual(firstPage());
    expect(gallery("#/gallery?order=oldest")).toEqual(firstPage());
    expect(gallery(`#/gallery?status=queued&after=<b>`)).toEqual(firstPage("queued"));
    // A bad id in the trail: the page still opens, with the first page before it.
    expect(gallery(`#/gallery?after=${b}&trail=${a},oops`)).toEqual({
      previous: [undefined],
      after: b,
    });
    // A trail without a page of its own means nothing.
    expect(gallery(`#/gallery?trail=${a}`)).toEqual(firstPage());
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
