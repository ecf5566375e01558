import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createTaskStore } from "../../src/tasks/store/create-task-store.js";
import type { TaskStore } from "../../src/tasks/store/task-store.js";
import { newTaskId, type TaskRecord } from "../../src/tasks/task-record.js";
import { REDIS_URL, deleteKeys, uniquePrefix } from "../support/redis.js";
import { testConfig } from "../support/start-test-app.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "task-store-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

let dbCount = 0;

/**
 * Every backend the service can run on, opened the way the service opens it.
 * A store's "place": a fresh SQLite file, or a fresh prefix on the shared Redis.
 */
const backends: Array<{ name: string; url: () => string; persistent: boolean }> = [
  { name: "memory", url: () => "memory://", persistent: false },
  { name: "sqlite", url: () => `sqlite://${join(dir, `store-${++dbCount}.db`)}`, persistent: true },
  { name: "redis", url: () => `${REDIS_URL}#${uniquePrefix("store")}`, persistent: true },
];

function record(overrides: Partial<TaskRecord> = {}): TaskRecord {
  return {
    id: newTaskId(),
    owner: "key:owner-a",
    status: "queued",
    model: "gpt-image-1",
    request: { model: "gpt-image-1", prompt: "a test", n: 1 },
    responseFormat: "b64_json",
    created: 1_700_000_000,
    attempts: 0,
    ...overrides,
  };
}

describe.each(backends)("TaskStore on $name", ({ url, persistent }) => {
  async function open(place = url()): Promise<TaskStore> {
    const [storeUrl, prefix] = place.split("#") as [string, string | undefined];
    const config = testConfig("http://127.0.0.1:9/v1", {
      storeUrl,
      config: prefix ? { store: { url: storeUrl, prefix } } : {},
    });
    const store = await createTaskStore(config, pino({ level: "silent" }));
    onTestFinished(async () => {
      await store.close().catch(() => undefined);
      if (prefix) await deleteKeys(prefix);
    });
    return store;
  }

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
    expect((await store.create(first, { idempotency: idem, maxPerOwner: 1 })).kind).toBe("created");
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
      images: [{ mime: "image/png", bytes: 10 }],
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
    expect(await store.listOwned(owner, { limit: 100, nowSec })).toMatchObject({ hasMore: false });
    expect(ids(await store.listOwned("key:nobody", { limit: 5, nowSec }))).toEqual([]);

    // Another owner's task, or an unknown one, is no place to start from.
    expect(await store.listOwned(owner, { limit: 5, after: theirs.id, nowSec })).toBeUndefined();
    expect(await store.listOwned(owner, { limit: 5, after: newTaskId(), nowSec })).toBeUndefined();
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
  });

  it("keeps an edit's input images until the task finishes", async () => {
    const store = await open();
    const task = record({
      kind: "edit",
      inputs: [
        { field: "image[]", mime: "image/png", bytes: 8 },
        { field: "mask", mime: "image/png", bytes: 3 },
      ],
    });
    const bytes = [Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255]), Buffer.from("msk")];
    await store.putInput(task.id, 0, bytes[0]!, 60_000);
    await store.putInput(task.id, 1, bytes[1]!, 60_000);
    await store.create(task);
    expect(await store.getInput(task.id, 0)).toEqual(bytes[0]);
    expect(await store.getInput(task.id, 1)).toEqual(bytes[1]);
    expect(await store.getInput(task.id, 2)).toBeUndefined();
    await store.transition(task.id, "queued", { status: "in_progress" });
    await store.transition(task.id, "in_progress", { status: "queued" });
    expect(await store.getInput(task.id, 1)).toEqual(bytes[1]);
    await store.transition(task.id, "queued", { status: "failed" }, { ttlMs: 60_000 });
    expect(await store.getInput(task.id, 0)).toBeUndefined();
    expect(await store.getInput(task.id, 1)).toBeUndefined();

    // Written for a task that was never created: deleted by hand, or gone with their TTL.
    const orphan = newTaskId();
    await store.putInput(orphan, 0, bytes[0]!, 60_000);
    await store.deleteInputs(orphan, 1);
    expect(await store.getInput(orphan, 0)).toBeUndefined();
  });

  it("puts a task that finishes with a webhook into the outbox, in the same step", async () => {
    const store = await open();
    const webhook = { url: "https://hooks.example.com/x", baseUrl: "http://localhost:8080" };
    const [hooked, plain, later] = [record({ webhook }), record(), record({ webhook })];
    for (const task of [hooked, plain, later]) await store.create(task);
    await store.transition(hooked.id, "queued", { status: "in_progress" });
    expect(await store.webhookOutbox(10)).toEqual([]);
    const before = Date.now();
    await store.transition(hooked.id, "in_progress", { status: "completed" }, { ttlMs: 60_000 });
    await store.transition(plain.id, "queued", { status: "failed" }, { ttlMs: 60_000 });
    await sleep(5);
    await store.transition(later.id, "queued", { status: "failed" }, { ttlMs: 60_000 });
    const outbox = await store.webhookOutbox(10);
    expect(outbox.map((entry) => entry.id)).toEqual([hooked.id, later.id]);
    expect(outbox[0]!.sinceMs).toBeGreaterThanOrEqual(before);
    expect(await store.webhookOutbox(1)).toHaveLength(1);
    await store.clearWebhookOutbox(hooked.id);
    await store.clearWebhookOutbox(hooked.id);
    expect((await store.webhookOutbox(10)).map((entry) => entry.id)).toEqual([later.id]);
  });

  it("keeps pending webhook deliveries in its journal (embedded stores), across a restart", async () => {
    const place = url();
    const store = await open(place);
    const journal = store.webhookJournal;
    if (place.startsWith("redis")) {
      expect(journal).toBeUndefined(); // BullMQ keeps them
      return;
    }
    const taskId = newTaskId();
    const delivery = (eventId: string) => ({
      eventId,
      taskId,
      url: "https://hooks.example.com/x",
      payload: `{"id":"${eventId}"}`,
    });
    await journal!.save({ delivery: delivery("evt_a"), attempt: 1, dueAt: 10 });
    await journal!.save({ delivery: delivery("evt_b"), attempt: 1, dueAt: 20 });
    await journal!.save({ delivery: delivery("evt_a"), attempt: 2, dueAt: 30 });
    const listed = await journal!.list();
    expect(listed.map((entry) => [entry.delivery.eventId, entry.attempt, entry.dueAt])).toEqual([
      ["evt_a", 2, 30],
      ["evt_b", 1, 20],
    ]);
    await journal!.remove("evt_b");
    await journal!.remove("evt_unknown");
    expect((await journal!.list()).map((entry) => entry.delivery.eventId)).toEqual(["evt_a"]);
    if (persistent) {
      await store.close();
      const reopened = await open(place);
      expect(await reopened.webhookJournal!.list()).toEqual([
        { delivery: delivery("evt_a"), attempt: 2, dueAt: 30 },
      ]);
    }
  });

  it("puts, gets and deletes image bytes", async () => {
    const store = await open();
    const id = newTaskId();
    const bytes = [Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255]), Buffer.alloc(70_000, 7)];
    await store.putImage(id, 0, bytes[0]!, 60_000);
    await store.putImage(id, 1, bytes[1]!, 60_000);
    expect(await store.getImage(id, 0)).toEqual(bytes[0]);
    expect(await store.getImage(id, 1)).toEqual(bytes[1]);
    expect(await store.getImage(id, 2)).toBeUndefined();
    expect(await store.getImage(newTaskId(), 0)).toBeUndefined();
    await store.deleteImages(id, 2);
    expect(await store.getImage(id, 0)).toBeUndefined();
    expect(await store.getImage(id, 1)).toBeUndefined();
  });

  it("forgets a finished task and images after their TTL, keeps unfinished ones", async () => {
    const store = await open();
    const finished = record();
    const waiting = record();
    await store.create(finished);
    await store.create(waiting);
    await store.transition(finished.id, "queued", { status: "failed" }, { ttlMs: 1000 });
    await store.putImage(finished.id, 0, Buffer.from("png"), 1000);
    expect((await store.get(finished.id))?.status).toBe("failed");
    expect(await store.getImage(finished.id, 0)).toEqual(Buffer.from("png"));

    await sleep(1500);
    expect(await store.get(finished.id)).toBeUndefined();
    expect(await store.getImage(finished.id, 0)).toBeUndefined();
    expect(await store.get(waiting.id)).toEqual(waiting);
    expect((await store.listUnfinished()).map((task) => task.id)).toEqual([waiting.id]);
  });

  it("keeps a meta value stable once set", async () => {
    const storeUrl = url();
    const store = await open(storeUrl);
    const values = await Promise.all([
      store.getOrSetMeta("secret", () => "first"),
      store.getOrSetMeta("secret", () => "second"),
    ]);
    expect(values).toEqual(["first", "first"]);
    expect(await store.getOrSetMeta("secret", () => "third")).toBe("first");
    expect(await store.getOrSetMeta("other", () => "x")).toBe("x");
    // Read without creating, and forgotten on request.
    expect(await store.getMeta("secret")).toBe("first");
    expect(await store.getMeta("absent")).toBeUndefined();
    await store.deleteMeta("other");
    expect(await store.getMeta("other")).toBeUndefined();

    if (persistent) {
      const task = record();
      await store.create(task);
      await store.close();
      const reopened = await open(storeUrl);
      expect(await reopened.getOrSetMeta("secret", () => "after restart")).toBe("first");
      expect(await reopened.get(task.id)).toEqual(task);
      expect((await reopened.listUnfinished()).map((t) => t.id)).toEqual([task.id]);
    }
  });
});
