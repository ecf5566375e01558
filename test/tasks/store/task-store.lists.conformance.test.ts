import { describe, expect, it } from "vitest";
import { newTaskId, type TaskRecord } from "../../../src/tasks/core/task-record.js";
import { record, storeBackends, storeOpener } from "./task-store-backends.js";

// The store conformance suite, the unfinished list and owners' pages: the same assertions on every backend.

describe.each(storeBackends())(
  "TaskStore on $name: the unfinished list and owners' pages",
  ({ url }) => {
    const open = storeOpener(url);

    it("lists unfinished tasks oldest first, without the finished ones", async () => {
      const store = await open();
      const late = record({ created: 300 });
      const early = record({ created: 100 });
      const middle = record({ created: 200 });
      const sameSecondA = record({ created: 400 });
      const sameSecondB = record({ created: 400 });
      const done = record({ created: 50 });
      for (const task of [late, early, middle, sameSecondA, sameSecondB, done]) {
        await store.create(task);
      }
      await store.transition(middle.id, "queued", { status: "in_progress" });
      await store.transition(done.id, "queued", { status: "failed" });

      const unfinished = await store.listUnfinished();
      expect(unfinished.map((task) => task.id)).toEqual([
        early.id,
        middle.id,
        late.id,
        sameSecondA.id,
        sameSecondB.id,
      ]);
      expect(unfinished[1]?.status).toBe("in_progress");

      // Handed back to queued, it stays listed; finished, it goes.
      await store.transition(middle.id, "in_progress", { status: "queued" });
      await store.transition(early.id, "queued", { status: "in_progress" });
      await store.transition(early.id, "in_progress", { status: "completed" });
      expect((await store.listUnfinished()).map((task) => task.id)).toEqual([
        middle.id,
        late.id,
        sameSecondA.id,
        sameSecondB.id,
      ]);
    });

    it("pages an owner's tasks newest first, by status, after a task, without other owners'", async () => {
      const store = await open();
      const mine = Array.from({ length: 7 }, (_, i) => record({ created: 1000 + i }));
      const theirs = record({ owner: "key:owner-b", created: 1003 });
      // Created in one second: the order of creation still holds.
      const sameSecond = [record({ created: 2000 }), record({ created: 2000 })];
      for (const task of [...mine.slice(0, 4), theirs, ...mine.slice(4), ...sameSecond]) {
        await store.create(task);
      }
      const newestFirst = [...sameSecond].reverse().concat([...mine].reverse());
      const ids = (page: { records: TaskRecord[] } | undefined) =>
        page?.records.map((task) => task.id);
      const owner = mine[0]!.owner;
      const nowSec = 1;

      const first = await store.listOwned(owner, { limit: 4, nowSec });
      expect(ids(first)).toEqual(newestFirst.slice(0, 4).map((task) => task.id));
      expect(first?.hasMore).toBe(true);
      const second = await store.listOwned(owner, { limit: 4, after: newestFirst[3]!.id, nowSec });
      expect(ids(second)).toEqual(newestFirst.slice(4, 8).map((task) => task.id));
      expect(second?.hasMore).toBe(true);
      const last = await store.listOwned(owner, { limit: 4, after: newestFirst[7]!.id, nowSec });
      expect(ids(last)).toEqual([newestFirst[8]!.id]);
      expect(last?.hasMore).toBe(false);
      expect(await store.listOwned(owner, { limit: 100, nowSec })).toMatchObject({
        hasMore: false,
      });
      expect(ids(await store.listOwned("key:nobody", { limit: 5, nowSec }))).toEqual([]);

      // Another owner's task, or an unknown one, is no place to start from.
      expect(await store.listOwned(owner, { limit: 5, after: theirs.id, nowSec })).toBeUndefined();
      expect(
        await store.listOwned(owner, { limit: 5, after: newTaskId(), nowSec }),
      ).toBeUndefined();
      expect(ids(await store.listOwned(theirs.owner, { limit: 5, nowSec }))).toEqual([theirs.id]);

      // By status, as tasks move; `after` may name a task of another status.
      await store.transition(mine[1]!.id, "queued", { status: "in_progress" });
      await store.transition(mine[1]!.id, "in_progress", { status: "completed" });
      await store.transition(mine[5]!.id, "queued", { status: "failed" });
      await store.transition(mine[3]!.id, "queued", { status: "in_progress" });
      const byStatus = async (status: TaskRecord["status"], after?: string) =>
        ids(await store.listOwned(owner, { limit: 10, status, after, nowSec }));
      expect(await byStatus("completed")).toEqual([mine[1]!.id]);
      expect(await byStatus("failed")).toEqual([mine[5]!.id]);
      expect(await byStatus("in_progress")).toEqual([mine[3]!.id]);
      expect(await byStatus("queued")).toEqual(
        newestFirst
          .filter((task) => ![mine[1], mine[3], mine[5]].includes(task))
          .map((task) => task.id),
      );
      expect(await byStatus("queued", mine[3]!.id)).toEqual([mine[2]!.id, mine[0]!.id]);
      const page = await store.listOwned(owner, { limit: 1, status: "completed", nowSec });
      expect(page?.records[0]).toMatchObject({ id: mine[1]!.id, status: "completed" });
      expect(page?.hasMore).toBe(false);
      // Handed back, a task is queued again in the list too.
      await store.transition(mine[3]!.id, "in_progress", { status: "queued" });
      expect(await byStatus("in_progress")).toEqual([]);
      expect(await byStatus("queued")).toContain(mine[3]!.id);
    });

    it("pages an owner's tasks oldest first with order asc, by status, after a task", async () => {
      const store = await open();
      const mine = Array.from({ length: 5 }, (_, i) => record({ created: 1000 + i }));
      const theirs = record({ owner: "key:owner-c", created: 1002 });
      for (const task of [...mine.slice(0, 2), theirs, ...mine.slice(2)]) await store.create(task);
      const owner = mine[0]!.owner;
      const nowSec = 1;
      const asc = async (query: { limit: number; after?: string; status?: "failed" }) => {
        const page = await store.listOwned(owner, { ...query, nowSec, order: "asc" });
        return page && { ids: page.records.map((task) => task.id), hasMore: page.hasMore };
      };
      const idsOf = (tasks: TaskRecord[]) => tasks.map((task) => task.id);

      expect(await asc({ limit: 2 })).toEqual({ ids: idsOf(mine.slice(0, 2)), hasMore: true });
      expect(await asc({ limit: 2, after: mine[1]!.id })).toEqual({
        ids: idsOf(mine.slice(2, 4)),
        hasMore: true,
      });
      expect(await asc({ limit: 2, after: mine[3]!.id })).toEqual({
        ids: [mine[4]!.id],
        hasMore: false,
      });
      expect(await asc({ limit: 2, after: mine[4]!.id })).toEqual({ ids: [], hasMore: false });
      expect(await asc({ limit: 2, after: theirs.id })).toBeUndefined();

      await store.transition(mine[3]!.id, "queued", { status: "failed" });
      await store.transition(mine[1]!.id, "queued", { status: "failed" });
      expect(await asc({ limit: 5, status: "failed" })).toEqual({
        ids: [mine[1]!.id, mine[3]!.id],
        hasMore: false,
      });
      expect(await asc({ limit: 5, status: "failed", after: mine[2]!.id })).toEqual({
        ids: [mine[3]!.id],
        hasMore: false,
      });
    });

    it("leaves finished tasks past their expires_at out of the list", async () => {
      const store = await open();
      const [old, fresh, running] = [record(), record(), record()];
      for (const task of [old, fresh, running]) await store.create(task);
      await store.transition(old.id, "queued", { status: "failed", expires_at: 100 });
      await store.transition(fresh.id, "queued", { status: "failed", expires_at: 300 });
      const page = await store.listOwned(old.owner, { limit: 1, nowSec: 200 });
      expect(page?.records.map((task) => task.id)).toEqual([running.id]);
      expect(page?.hasMore).toBe(true);
      const all = await store.listOwned(old.owner, { limit: 5, nowSec: 200 });
      expect(all?.records.map((task) => task.id)).toEqual([running.id, fresh.id]);
      expect(all?.hasMore).toBe(false);
      // Oldest first, the expired task is passed over and the page read on past it.
      const oldest = await store.listOwned(old.owner, { limit: 1, nowSec: 200, order: "asc" });
      expect(oldest?.records.map((task) => task.id)).toEqual([fresh.id]);
      expect(oldest?.hasMore).toBe(true);
    });
  },
);
