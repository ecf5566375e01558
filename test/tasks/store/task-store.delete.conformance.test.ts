import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { newTaskId } from "../../../src/tasks/core/task-record.js";
import { record, storeBackends, storeOpener } from "./task-store-backends.js";

// The store conformance suite, deleting a task: the same assertions on every backend.

const image = (key: string) => ({ mime: "image/png", bytes: 10, key });

describe.each(storeBackends())("TaskStore on $name: deleting a task", ({ url }) => {
  const open = storeOpener(url);

  it("deletes an unfinished task and its entries; a second delete and an unknown id find none", async () => {
    const store = await open();
    const [queued, running, kept] = [record({ created: 1 }), record({ created: 2 }), record()];
    for (const task of [queued, running, kept]) await store.create(task);
    await store.transition(running.id, "queued", { status: "in_progress" });

    expect(await store.delete(queued.id)).toEqual(queued);
    expect((await store.delete(running.id))?.status).toBe("in_progress");
    expect(await store.get(queued.id)).toBeUndefined();
    expect(await store.get(running.id)).toBeUndefined();
    expect((await store.listUnfinished()).map((task) => task.id)).toEqual([kept.id]);
    const nowSec = 1;
    const page = await store.listOwned(kept.owner, { limit: 10, nowSec });
    expect(page?.records.map((task) => task.id)).toEqual([kept.id]);
    for (const status of ["queued", "in_progress"] as const) {
      const byStatus = await store.listOwned(kept.owner, { limit: 10, status, nowSec });
      expect(byStatus?.records.map((task) => task.id)).toEqual(
        status === "queued" ? [kept.id] : [],
      );
    }
    // A page cannot start after a task that is gone.
    expect(
      await store.listOwned(kept.owner, { limit: 10, after: queued.id, nowSec }),
    ).toBeUndefined();
    // Its transitions find nothing.
    expect(await store.transition(running.id, "in_progress", { status: "failed" })).toBeUndefined();

    expect(await store.delete(queued.id)).toBeUndefined();
    expect(await store.delete(newTaskId())).toBeUndefined();
    expect(await store.get(kept.id)).toEqual(kept);
  });

  it("gives the owner its place in the store back", async () => {
    const store = await open();
    const first = record();
    await store.create(first, { maxPerOwner: 1 });
    expect((await store.create(record(), { maxPerOwner: 1 })).kind).toBe("owner_full");
    await store.transition(first.id, "queued", { status: "failed" }, { ttlMs: 60_000 });
    await store.delete(first.id);
    expect((await store.create(record(), { maxPerOwner: 1 })).kind).toBe("created");
  });

  it("takes a finished task out of the outbox and the lists; its idempotency key reads as unknown", async () => {
    const store = await open();
    const webhook = { url: "https://hooks.example.com/x", baseUrl: "http://localhost:8080" };
    const task = record({ webhook });
    const other = record({ webhook });
    const idempotency = { key: "make-once", fingerprint: "body-a" };
    await store.create(task, { idempotency });
    await store.create(other);
    for (const finished of [task, other]) {
      await store.transition(finished.id, "queued", { status: "in_progress" });
      await store.transition(
        finished.id,
        "in_progress",
        { status: "completed", images: [image(`day/${finished.id}/0.png`)] },
        { ttlMs: 60_000 },
      );
    }
    const outbox = async () => (await store.webhookOutbox(10)).map((entry) => entry.id).sort();
    expect(await outbox()).toEqual([task.id, other.id].sort());

    const deleted = await store.delete(task.id);
    expect(deleted).toMatchObject({ id: task.id, status: "completed" });
    expect(deleted?.images).toEqual([image(`day/${task.id}/0.png`)]);
    expect(await outbox()).toEqual([other.id]);
    const nowSec = 1;
    const ids = async (status?: "completed") =>
      (
        await store.listOwned(task.owner, { limit: 10, nowSec, ...(status ? { status } : {}) })
      )?.records.map((shown) => shown.id);
    expect(await ids()).toEqual([other.id]);
    expect(await ids("completed")).toEqual([other.id]);

    expect(await store.findIdempotent(task.owner, idempotency)).toBeUndefined();
    const again = record();
    const made = await store.create(again, { idempotency });
    expect(made).toEqual({ kind: "created", record: again });
    expect(await store.findIdempotent(task.owner, idempotency)).toEqual({
      kind: "replayed",
      record: again,
    });
  });

  it("leaves nothing for the sweep: a deleted task's image keys are never handed on", async () => {
    const store = await open();
    const [gone, expiring] = [record(), record()];
    for (const task of [gone, expiring]) {
      await store.create(task);
      await store.transition(task.id, "queued", { status: "in_progress" });
      await store.transition(
        task.id,
        "in_progress",
        {
          status: "completed",
          images: [image(`day/${task.id}/0.png`)],
          partials: [image(`day/${task.id}/partial-0.png`)],
        },
        { ttlMs: 500 },
      );
    }
    await store.sweepExpired(async () => undefined);
    await store.delete(gone.id);

    const dropped: string[] = [];
    const sweep = () =>
      store.sweepExpired(async (keys) => {
        dropped.push(...keys);
      });
    // Until the task that was left alone has expired and been swept.
    const deadline = Date.now() + 10_000;
    while (!dropped.includes(`day/${expiring.id}/0.png`) && Date.now() < deadline) {
      await sleep(100);
      await sweep();
    }
    await sweep();
    expect(dropped.sort()).toEqual([
      `day/${expiring.id}/0.png`,
      `day/${expiring.id}/partial-0.png`,
    ]);
    expect(await store.get(expiring.id)).toBeUndefined();
  });
});
