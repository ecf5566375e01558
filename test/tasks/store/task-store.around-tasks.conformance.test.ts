import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { newTaskId } from "../../../src/tasks/core/task-record.js";
import { backendOpener, record, storeBackends, storeOpener } from "./task-store-backends.js";

// The store conformance suite, the webhook outbox and journal, expiry, meta values: the same
// assertions on every backend. (Image bytes live in the image store: its own conformance suite.)
// The journal is the embedded backends' own, beside their store.

describe.each(storeBackends())(
  "TaskStore on $name: the webhook outbox and journal, expiry, meta values",
  ({ url, persistent }) => {
    const open = storeOpener(url);
    const openBackend = backendOpener(url);

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
      const backend = await openBackend(place);
      const journal = backend.webhookJournal;
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
        await backend.close();
        const reopened = await openBackend(place);
        expect(await reopened.webhookJournal!.list()).toEqual([
          { delivery: delivery("evt_a"), attempt: 2, dueAt: 30 },
        ]);
      }
    });

    it("forgets a finished task after its TTL, keeps unfinished ones", async () => {
      const store = await open();
      const finished = record();
      const waiting = record();
      await store.create(finished);
      await store.create(waiting);
      await store.transition(finished.id, "queued", { status: "failed" }, { ttlMs: 1000 });
      expect((await store.get(finished.id))?.status).toBe("failed");

      await sleep(1500);
      expect(await store.get(finished.id)).toBeUndefined();
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
  },
);
