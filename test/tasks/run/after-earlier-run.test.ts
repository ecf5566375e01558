import { describe, expect, it } from "vitest";
import type { TaskLease } from "../../../src/tasks/core/task-queue.js";
import { afterEarlierRunHere, type LeaseRuns } from "../../../src/tasks/run/after-earlier-run.js";

/*
 * A lease that lapsed while its run lives (a store outage, a Redis failover)
 * has the queue hand the task out again, in this process too, while the first
 * run may still be writing the task's end. Seen in CI: the second run claimed
 * the task after its timed grace and called the channel again. Here each
 * "run" does what a run does with the task: generates unless it is ended.
 */

function lease(taskId: string, controller = new AbortController()): TaskLease {
  return { taskId, signal: controller.signal, draining: new AbortController().signal };
}

/**
 * A task, and runs of it that generate once unless the task ended (as `TaskRunner.run`): `run`
 * ends the task at once, `held` once `end()` is called.
 */
function task() {
  const state = { ended: false, generations: 0, runs: 0 };
  const runUntil = (endAfter: Promise<void>) => async () => {
    state.runs += 1;
    if (state.ended) return;
    state.generations += 1;
    await endAfter; // the end written late: with minReplicas, or again after a store outage
    state.ended = true;
  };
  let end!: () => void;
  const held = runUntil(new Promise((resolve) => (end = resolve)));
  return { state, run: runUntil(Promise.resolve()), held, end: () => end() };
}

describe("a second lease of a task whose run goes on in this process", () => {
  it("starts once that run settled, and finds the task ended: one generation", async () => {
    const runs: LeaseRuns = new Map();
    const { state, run, held, end } = task();
    const first = afterEarlierRunHere(runs, lease("task_a"), held);
    const second = afterEarlierRunHere(runs, lease("task_a"), run);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(state.runs).toBe(1);
    end();
    await Promise.all([first, second]);
    expect(state).toEqual({ ended: true, generations: 1, runs: 2 });
    expect(runs.size).toBe(0);
  });

  it("never runs when its lease ends while it waits", async () => {
    const runs: LeaseRuns = new Map();
    const { state, run, held, end } = task();
    const first = afterEarlierRunHere(runs, lease("task_b"), held);
    const controller = new AbortController();
    const second = afterEarlierRunHere(runs, lease("task_b", controller), run);
    controller.abort("handback");
    await second;
    expect(state.runs).toBe(1);
    end();
    await first;
    expect(runs.size).toBe(0);
  });

  it("runs at once beside another task's run, and after an earlier run that failed", async () => {
    const runs: LeaseRuns = new Map();
    const other = task();
    const otherRun = afterEarlierRunHere(runs, lease("task_c"), other.held);
    const failed = afterEarlierRunHere(runs, lease("task_d"), () =>
      Promise.reject(new Error("the task store is away")),
    );
    const { state, run } = task();
    const again = afterEarlierRunHere(runs, lease("task_d"), run);
    await expect(failed).rejects.toThrow("the task store is away");
    await again;
    expect(state).toEqual({ ended: true, generations: 1, runs: 1 });
    expect(other.state.ended).toBe(false);
    other.end();
    await otherRun;
    expect(runs.size).toBe(0);
  });
});
