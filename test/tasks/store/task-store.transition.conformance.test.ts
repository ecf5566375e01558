import { describe, expect, it } from "vitest";
import { newTaskId } from "../../../src/tasks/core/task-record.js";
import { record, storeBackends, storeOpener } from "./task-store-backends.js";

// The store conformance suite, transitions: the same assertions on every backend.

describe.each(storeBackends())("TaskStore on $name: transitions", ({ name, url }) => {
  const open = storeOpener(url);

  it("transitions as a compare-and-set", async () => {
    const store = await open();
    const task = record();
    await store.create(task);

    const started = await store.transition(task.id, "queued", {
      status: "in_progress",
      started_at: 1_700_000_001,
      attempts: 1,
    });
    expect(started).toEqual({
      ...task,
      status: "in_progress",
      started_at: 1_700_000_001,
      attempts: 1,
    });
    expect(await store.get(task.id)).toEqual(started);

    // Lost race: the task is no longer queued; nothing is written.
    expect(await store.transition(task.id, "queued", { status: "failed" })).toBeUndefined();
    expect(await store.get(task.id)).toEqual(started);
    // Gone: undefined as well.
    expect(
      await store.transition(newTaskId(), "queued", { status: "in_progress" }),
    ).toBeUndefined();

    const completed = await store.transition(task.id, "in_progress", {
      status: "completed",
      completed_at: 1_700_000_002,
      images: [{ mime: "image/png", bytes: 10, key: "2023-11-15/t/0.png" }],
    });
    expect(completed?.status).toBe("completed");
    expect(await store.get(task.id)).toEqual(completed);
  });

  it("refuses an illegal transition, writing nothing", async () => {
    const store = await open();
    const task = record();
    await store.create(task);
    await expect(store.transition(task.id, "queued", { status: "completed" })).rejects.toThrow(
      /illegal/,
    );
    await expect(store.transition(task.id, "queued", { status: "queued" })).rejects.toThrow();
    expect(await store.get(task.id)).toEqual(task);

    await store.transition(task.id, "queued", { status: "failed" });
    for (const to of ["queued", "in_progress", "completed"] as const) {
      await expect(store.transition(task.id, "failed", { status: to })).rejects.toThrow();
    }
    expect((await store.get(task.id))?.status).toBe("failed");
    // The store keeps working after a refused transition.
    const next = record();
    expect((await store.create(next)).kind).toBe("created");
  });

  it("lets only the run named by attempts write, and a new run take a task over", async () => {
    const store = await open();
    const task = record();
    await store.create(task);
    const first = await store.transition(
      task.id,
      "queued",
      { status: "in_progress", started_at: 10, attempts: 1 },
      { attempts: 0 },
    );
    expect(first?.attempts).toBe(1);
    // A new run takes the task over (its earlier one ended with its holder).
    const second = await store.transition(
      task.id,
      "in_progress",
      { status: "in_progress", started_at: 20, attempts: 2 },
      { attempts: 1 },
    );
    expect(second).toMatchObject({ status: "in_progress", started_at: 20, attempts: 2 });
    // The first run can no longer end it.
    expect(
      await store.transition(task.id, "in_progress", { status: "completed" }, { attempts: 1 }),
    ).toBeUndefined();
    expect((await store.get(task.id))?.status).toBe("in_progress");
    // Handed back: a field set to undefined is gone.
    const back = await store.transition(
      task.id,
      "in_progress",
      { status: "queued", started_at: undefined, attempts: 1 },
      { attempts: 2 },
    );
    expect(back).not.toHaveProperty("started_at");
    expect(await store.get(task.id)).not.toHaveProperty("started_at");
  });

  it("lets exactly one of many concurrent transitions from one state win", async () => {
    const store = await open();
    const task = record();
    await store.create(task);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        store.transition(task.id, "queued", { status: "in_progress", attempts: i + 1 }),
      ),
    );
    const winners = results.filter(Boolean);
    expect(winners).toHaveLength(1);
    expect(await store.get(task.id)).toEqual(winners[0]);
  });

  // Two replicas on one place (the stores several processes share): what one of them read or wrote last is no ground for its next
  // transition once the other wrote (the Redis store starts a transition from it).
  it.runIf(name.startsWith("redis"))(
    "transitions from the record as stored, whoever wrote it last",
    async () => {
      const place = url();
      const one = await open(place);
      const other = await open(place);
      const task = record();
      await one.create(task);
      expect((await one.get(task.id))?.status).toBe("queued");
      // The other replica runs the task and hands it back, with a field of its own.
      await other.transition(task.id, "queued", { status: "in_progress", attempts: 1 });
      // Behind: the task is no longer queued.
      expect(await one.transition(task.id, "queued", { status: "failed" })).toBeUndefined();
      expect(
        await other.transition(task.id, "in_progress", { status: "queued", model: "x" }),
      ).toMatchObject({ status: "queued" });
      // Queued again, but written since: merged into what the other wrote.
      const started = await one.transition(task.id, "queued", {
        status: "in_progress",
        attempts: 2,
      });
      expect(started).toMatchObject({ status: "in_progress", model: "x", attempts: 2 });
      expect(await other.get(task.id)).toEqual(started);
      // What one wrote last is behind the other's end of the task.
      await other.transition(task.id, "in_progress", { status: "completed", completed_at: 3 });
      expect(await one.transition(task.id, "in_progress", { status: "failed" })).toBeUndefined();
      expect((await one.get(task.id))?.status).toBe("completed");
    },
  );
});
