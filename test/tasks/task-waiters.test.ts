import { describe, expect, it } from "vitest";
import { createLocalTaskEvents } from "../../src/tasks/task-events.js";
import { createTaskWaiters } from "../../src/tasks/task-waiters.js";

describe("createTaskWaiters", () => {
  it("wakes the watches of the task that finished, and only those", async () => {
    const events = createLocalTaskEvents();
    const waiters = createTaskWaiters(events);
    const mine = waiters.watch("task_a");
    const other = waiters.watch("task_b");
    const waitingMine = mine.until(10_000);
    const waitingOther = other.until(50);
    await events.publish({ type: "finished", taskId: "task_a", status: "completed" });
    expect(await waitingMine).toBe("finished");
    expect(await waitingOther).toBe("timeout");
    mine.dispose();
    other.dispose();
    expect(waiters.size).toBe(0);
    waiters.close();
  });

  it("remembers a finish heard before the wait began (watch first, then read)", async () => {
    const events = createLocalTaskEvents();
    const waiters = createTaskWaiters(events);
    const watch = waiters.watch("task_a");
    await events.publish({ type: "finished", taskId: "task_a", status: "failed" });
    expect(await watch.until(10_000)).toBe("finished");
    watch.dispose();
    waiters.close();
  });

  it("ends a wait when its client goes away or the service stops, and forgets it", async () => {
    const events = createLocalTaskEvents();
    const waiters = createTaskWaiters(events);
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
});
