import { describe, expect, it } from "vitest";
import { createTaskFeed } from "../../../src/tasks/events/task-feed.js";
import { createLocalTaskEvents, type TaskEvents } from "../../../src/tasks/core/task-events.js";
import type { TaskRecord, TaskStatus } from "../../../src/tasks/core/task-record.js";
import { createTaskWaiters } from "../../../src/tasks/service/task-waiters.js";

/** Announces that `id` finished, as the finisher does. */
function finish(events: TaskEvents, id: string, status: TaskStatus) {
  const record: TaskRecord = {
    id,
    owner: "o",
    status,
    model: "gpt-image-1",
    request: {},
    responseFormat: "url",
    created: 0,
    attempts: 1,
  };
  return events.publish({ type: "stage", stage: status as "completed", record });
}

describe("createTaskWaiters", () => {
  it("wakes the watches of the task that finished, and only those", async () => {
    const events = createLocalTaskEvents();
    const waiters = createTaskWaiters(createTaskFeed(events));
    const mine = waiters.watch("task_a");
    const other = waiters.watch("task_b");
    const waitingMine = mine.until(10_000);
    const waitingOther = other.until(50);
    await finish(events, "task_a", "completed");
    expect(await waitingMine).toBe("finished");
    expect(await waitingOther).toBe("timeout");
    mine.dispose();
    other.dispose();
    expect(waiters.size).toBe(0);
    waiters.close();
  });

  it("remembers a finish heard before the wait began (watch first, then read)", async () => {
    const events = createLocalTaskEvents();
    const waiters = createTaskWaiters(createTaskFeed(events));
    const watch = waiters.watch("task_a");
    await finish(events, "task_a", "failed");
    expect(await watch.until(10_000)).toBe("finished");
    watch.dispose();
    waiters.close();
  });

  it("ends a wait when its client goes away or the service stops, and forgets it", async () => {
    const events = createLocalTaskEvents();
    const waiters = createTaskWaiters(createTaskFeed(events));
    const controller = new AbortController();
    const gone = waiters.watch("task_a");
    const stays = waiters.watch("task_a");
    const waitingGone = gone.until(60_000, controller.signal);
    const waitingStays = stays.until(60_000);
    controller.abort();
    expect(await waitingGone).toBe("aborted");
    gone.dispose();
    gone.dispose();
    expect(waiters.size).toBe(1);
    waiters.release();
    expect(await waitingStays).toBe("released");
    stays.dispose();
    const late = waiters.watch("task_c");
    expect(await late.until(60_000)).toBe("released");
    late.dispose();
    expect(waiters.size).toBe(0);
    waiters.close();
  });

  it("tells a wait that the bus was cut off, so it reads the task again, and waits on after", async () => {
    const events = createLocalTaskEvents();
    const waiters = createTaskWaiters(createTaskFeed(events));
    const watch = waiters.watch("task_a");
    const waiting = watch.until(60_000);
    await events.publish({ type: "resync" });
    expect(await waiting).toBe("resync");
    const again = watch.until(60_000);
    await finish(events, "task_b", "completed");
    await finish(events, "task_a", "completed");
    expect(await again).toBe("finished");
    expect(await watch.until(60_000)).toBe("finished");
    watch.dispose();
    waiters.close();
  });
});
