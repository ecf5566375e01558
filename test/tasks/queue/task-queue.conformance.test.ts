import { leaseSec } from "../../support/time-factor.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { openTaskBackend } from "../../../src/tasks/open-task-backend.js";
import type {
  LeaseEnd,
  QueueEntry,
  TaskLease,
  TaskQueue,
} from "../../../src/tasks/core/task-queue.js";
import { newTaskId } from "../../../src/tasks/core/task-record.js";
import { REDIS_URL, deleteKeys, uniquePrefix } from "../../support/redis.js";
import { useFileTopologies } from "../../support/redis-topologies.js";
import { testConfig } from "../../support/start-test-app.js";
import { waitUntil } from "../task-api.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "task-queue-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));
let dbCount = 0;
const topologies = useFileTopologies();

/**
 * Every backend's queue, opened the way the service opens it: the in-process
 * queue of the embedded stores (memory: a stopped task is not picked up
 * again; SQLite: it is, by the next process) and BullMQ on Redis: one server, a
 * Sentinel set and a Cluster.
 */
const backends: Array<{ name: string; place: () => string; handsBack: boolean }> = [
  { name: "memory", place: () => "memory://", handsBack: false },
  {
    name: "sqlite",
    place: () => `sqlite://${join(dir, `queue-${++dbCount}.db`)}`,
    handsBack: true,
  },
  { name: "redis", place: () => `${REDIS_URL}#${uniquePrefix("queue")}`, handsBack: true },
  {
    name: "redis-sentinel",
    place: () => `${topologies.sentinelUrl()}#${uniquePrefix("queue")}`,
    handsBack: true,
  },
  {
    name: "redis-cluster",
    place: () => `${topologies.clusterUrl()}#${uniquePrefix("queue")}`,
    handsBack: true,
  },
];

const entry = (owner = "key:a"): QueueEntry => ({ taskId: newTaskId(), owner });

/** A handler that records its leases and holds each run until the test lets it end. */
function recorder() {
  const started: string[] = [];
  const ended = new Map<string, LeaseEnd | "done">();
  const finish = new Map<string, () => void>();
  let running = 0;
  let maxRunning = 0;
  return {
    started,
    ended,
    get running() {
      return running;
    },
    get maxRunning() {
      return maxRunning;
    },
    /** Lets a run end as if its task finished. */
    release(taskId: string) {
      finish.get(taskId)?.();
    },
    async handler(lease: TaskLease) {
      started.push(lease.taskId);
      running++;
      maxRunning = Math.max(maxRunning, running);
      await new Promise<void>((resolve) => {
        finish.set(lease.taskId, resolve);
        lease.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      running--;
      ended.set(
        lease.taskId,
        lease.signal.aborted ? (lease.signal.reason as LeaseEnd) : ("done" as const),
      );
    },
  };
}

describe.each(backends)("TaskQueue on $name", ({ name, place, handsBack }) => {
  /** Opens a queue (a "replica" of the place); closed, and its keys deleted, after the test. */
  async function open(at = place(), maxConcurrent = 2): Promise<TaskQueue> {
    const [storeUrl, prefix] = at.split("#") as [string, string | undefined];
    const config = testConfig("http://127.0.0.1:9/v1", {
      storeUrl,
      imageTasks: { maxConcurrent, leaseSec: leaseSec(1) },
      config: prefix ? { store: { url: storeUrl, prefix } } : {},
    });
    const backend = await openTaskBackend(config, pino({ level: "silent" }));
    let stopped = false;
    onTestFinished(async () => {
      if (!stopped) await backend.queue.stop(0);
      await backend.close();
      if (prefix && storeUrl.startsWith("redis://")) await deleteKeys(prefix);
    });
    const stop = backend.queue.stop.bind(backend.queue);
    backend.queue.stop = async (graceMs) => {
      stopped = true;
      await stop(graceMs);
    };
    return backend.queue;
  }

  it("admits within the limits (free slots count), per owner too, and takes back released places", async () => {
    const queue = await open(place(), 1);
    const limits = { maxQueued: 2, maxQueuedPerOwner: 1 };
    const a = [entry(), entry(), entry()];
    // One slot free and one waiting place for this owner: two of its tasks.
    expect(await queue.admit(a[0]!, limits)).toEqual({ admitted: true });
    expect(await queue.admit(a[1]!, limits)).toEqual({ admitted: true });
    expect(await queue.admit(a[2]!, limits)).toEqual({
      admitted: false,
      reason: "owner_queue_full",
    });
    // Another owner takes the last place of the queue; then it is full for everyone.
    expect(await queue.admit(entry("key:b"), limits)).toEqual({ admitted: true });
    expect(await queue.admit(entry("key:c"), limits)).toEqual({
      admitted: false,
      reason: "queue_full",
    });
    await queue.release(a[0]!);
    expect(await queue.admit(a[2]!, limits)).toEqual({ admitted: true });
  });

  it("admits exactly the limit under concurrent admissions", async () => {
    const queue = await open(place(), 1);
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        queue.admit(entry(`key:${i % 2}`), { maxQueued: 3, maxQueuedPerOwner: 10 }),
      ),
    );
    // Three waiting places and one free slot.
    expect(answers.filter((answer) => answer.admitted)).toHaveLength(4);
  });

  it("hands tasks over in order, at most maxConcurrent at once, and counts them", async () => {
    const queue = await open(place(), 2);
    const runs = recorder();
    const entries = Array.from({ length: 4 }, () => entry());
    for (const one of entries) await queue.enqueue(one);
    await queue.start(runs.handler);
    await waitUntil(() => runs.started.length === 2, "two runs to start");
    expect(runs.started).toEqual(entries.slice(0, 2).map((one) => one.taskId));
    await waitUntil(
      async () => JSON.stringify(await queue.counts()) === '{"waiting":2,"running":2}',
      "the counts to show two waiting and two running",
    );
    for (const one of entries) {
      await waitUntil(() => runs.started.includes(one.taskId), "the task to start");
      runs.release(one.taskId);
    }
    await waitUntil(() => runs.ended.size === 4, "every run to end");
    expect(runs.started).toEqual(entries.map((one) => one.taskId));
    expect(runs.maxRunning).toBe(2);
    expect([...runs.ended.values()]).toEqual(["done", "done", "done", "done"]);
    await waitUntil(
      async () => JSON.stringify(await queue.counts()) === '{"waiting":0,"running":0}',
      "the counts to go back to zero",
    );
  });

  it("takes out a waiting task, not a running one; enqueueing twice runs a task once", async () => {
    const queue = await open(place(), 1);
    const runs = recorder();
    const [first, second] = [entry(), entry()];
    await queue.enqueue(first);
    await queue.enqueue(first);
    await queue.enqueue(second);
    await queue.start(runs.handler);
    await waitUntil(() => runs.started.length === 1, "the first run to start");
    expect(await queue.remove(second)).toBe(true);
    expect(await queue.remove(first)).toBe(false);
    runs.release(first.taskId);
    const third = entry();
    await queue.enqueue(third);
    await waitUntil(() => runs.started.includes(third.taskId), "the third run to start");
    runs.release(third.taskId);
    expect(runs.started).toEqual([first.taskId, third.taskId]);
  });

  it("ends a running task's lease with cancelled", async () => {
    const queue = await open();
    const runs = recorder();
    const one = entry();
    await queue.enqueue(one);
    await queue.start(runs.handler);
    await waitUntil(() => runs.started.length === 1, "the run to start");
    await queue.cancel(one.taskId);
    await waitUntil(() => runs.ended.has(one.taskId), "the lease to end");
    expect(runs.ended.get(one.taskId)).toBe("cancelled");
  });

  it("adopts unfinished tasks it does not know, once, beside the ones it runs", async () => {
    const queue = await open(place(), 1);
    const runs = recorder();
    const [running, lost] = [entry(), entry()];
    await queue.enqueue(running);
    await queue.start(runs.handler);
    await waitUntil(() => runs.started.length === 1, "the run to start");
    await queue.adopt([running, lost, lost]);
    runs.release(running.taskId);
    await waitUntil(() => runs.started.length === 2, "the adopted task to start");
    runs.release(lost.taskId);
    expect(runs.started).toEqual([running.taskId, lost.taskId]);
  });

  it(`on stop, gives a running task its grace, then ends its lease with ${handsBack ? "handback" : "shutdown"}`, async () => {
    const queue = await open();
    const runs = recorder();
    const [quick, slow] = [entry(), entry()];
    await queue.enqueue(quick);
    await queue.enqueue(slow);
    await queue.start(runs.handler);
    await waitUntil(() => runs.started.length === 2, "both runs to start");
    const stopped = queue.stop(300);
    runs.release(quick.taskId);
    await stopped;
    expect(runs.ended.get(quick.taskId)).toBe("done");
    expect(runs.ended.get(slow.taskId)).toBe(handsBack ? "handback" : "shutdown");
  });

  if (name.startsWith("redis")) {
    it("shares the limit across replicas, and a replica that stops hands its task to another at once", async () => {
      const shared = place();
      const [one, two] = [await open(shared, 1), await open(shared, 1)];
      const [runsOne, runsTwo] = [recorder(), recorder()];
      const [a, b] = [entry(), entry()];
      await one.enqueue(a);
      await one.enqueue(b);
      await one.start(runsOne.handler);
      await two.start(runsTwo.handler);
      await waitUntil(() => runsOne.started.length + runsTwo.started.length === 1, "one run");
      // The deployment's limit is 1: the second task waits, whichever replica is idle.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(runsOne.started.length + runsTwo.started.length).toBe(1);
      const [holder, other] = runsOne.started.length === 1 ? [one, two] : [two, one];
      const [holderRuns, otherRuns] = holder === one ? [runsOne, runsTwo] : [runsTwo, runsOne];
      const heldTask = holderRuns.started[0]!;

      await holder.stop(0);
      expect(holderRuns.ended.get(heldTask)).toBe("handback");
      await waitUntil(() => otherRuns.started.includes(heldTask), "the other replica to take it");
      expect(await other.counts()).toMatchObject({ running: 1 });
    });
  }
});
