import { describe, expect, it } from "vitest";
import { newTaskId } from "../../../src/tasks/core/task-record.js";
import { record, storeBackends, storeOpener } from "./task-store-backends.js";

// The store conformance suite, creation, idempotency keys and each owner's share: the same assertions on every backend.

describe.each(storeBackends())(
  "TaskStore on $name: creation, idempotency keys and each owner's share",
  ({ url, persistent }) => {
    const open = storeOpener(url);

    it("says whether it outlives the process, and answers ping", async () => {
      const store = await open();
      expect(store.persistent).toBe(persistent);
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it("creates and gets a task; an unknown id is undefined", async () => {
      const store = await open();
      const task = record();
      expect(await store.create(task)).toEqual({ kind: "created", record: task });
      expect(await store.get(task.id)).toEqual(task);
      expect(await store.get(newTaskId())).toBeUndefined();
    });

    it("replays an idempotency key with the same fingerprint, refuses another, per owner", async () => {
      const store = await open();
      const first = record();
      const idem = { key: "k1", fingerprint: "fp-1" };
      expect((await store.create(first, { idempotency: idem })).kind).toBe("created");

      expect(await store.create(record(), { idempotency: idem })).toEqual({
        kind: "replayed",
        record: first,
      });
      expect(
        await store.create(record(), { idempotency: { key: "k1", fingerprint: "fp-2" } }),
      ).toEqual({
        kind: "conflict",
      });
      const otherOwner = record({ owner: "key:owner-b" });
      expect(await store.create(otherOwner, { idempotency: idem })).toEqual({
        kind: "created",
        record: otherOwner,
      });
      const otherKey = record();
      expect(
        (await store.create(otherKey, { idempotency: { key: "k2", fingerprint: "fp-1" } })).kind,
      ).toBe("created");

      // The replay answers the task as it is now.
      await store.transition(first.id, "queued", { status: "in_progress", started_at: 1 });
      const replay = await store.create(record(), { idempotency: idem });
      expect(replay.kind === "replayed" && replay.record.status).toBe("in_progress");
    });

    it("makes concurrent creates with one idempotency key one task", async () => {
      const store = await open();
      const idem = { key: "same", fingerprint: "fp" };
      const results = await Promise.all(
        Array.from({ length: 5 }, () => store.create(record(), { idempotency: idem })),
      );
      expect(results.filter((result) => result.kind === "created")).toHaveLength(1);
      const ids = results.map((result) => ("record" in result ? result.record.id : result.kind));
      expect(new Set(ids).size).toBe(1);
    });

    it("finds what an idempotency key made, per owner, and nothing for an unknown key", async () => {
      const store = await open();
      const first = record();
      const idem = { key: "find", fingerprint: "fp" };
      expect(await store.findIdempotent(first.owner, idem)).toBeUndefined();
      await store.create(first, { idempotency: idem });
      expect(await store.findIdempotent(first.owner, idem)).toEqual({
        kind: "replayed",
        record: first,
      });
      expect(await store.findIdempotent(first.owner, { key: "find", fingerprint: "x" })).toEqual({
        kind: "conflict",
      });
      expect(await store.findIdempotent("key:owner-b", idem)).toBeUndefined();
    });

    it("keeps each owner within maxPerOwner, atomically; a replay is answered even when full", async () => {
      const store = await open();
      const idem = { key: "full", fingerprint: "fp" };
      const first = record();
      expect((await store.create(first, { idempotency: idem, maxPerOwner: 1 })).kind).toBe(
        "created",
      );
      const refused = record();
      expect(await store.create(refused, { maxPerOwner: 1 })).toEqual({ kind: "owner_full" });
      expect(await store.get(refused.id)).toBeUndefined();
      expect(await store.create(record(), { idempotency: idem, maxPerOwner: 1 })).toEqual({
        kind: "replayed",
        record: first,
      });
      // Another owner has its own share.
      expect((await store.create(record({ owner: "key:owner-b" }), { maxPerOwner: 1 })).kind).toBe(
        "created",
      );
      // Finished tasks still count until they expire.
      await store.transition(first.id, "queued", { status: "failed" }, { ttlMs: 60_000 });
      expect((await store.create(record(), { maxPerOwner: 1 })).kind).toBe("owner_full");

      // Concurrent creates of one owner: exactly the share is written.
      const results = await Promise.all(
        Array.from({ length: 6 }, () =>
          store.create(record({ owner: "key:burst" }), { maxPerOwner: 2 }),
        ),
      );
      expect(results.filter((result) => result.kind === "created")).toHaveLength(2);
      expect(results.filter((result) => result.kind === "owner_full")).toHaveLength(4);
    });
  },
);
