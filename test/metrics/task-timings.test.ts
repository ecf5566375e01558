import { describe, expect, it } from "vitest";
import { slow } from "../support/time-factor.js";
import type { TestApp } from "../support/start-test-app.js";
import { submitOk, useApp, waitForStatus } from "../tasks/task-api.js";

/*
 * A task's queue wait and run time, as the dashboard's panels read them: from the
 * millisecond the task was created and started, not from `created` and `started_at`
 * (whole seconds, OpenAI's fields), which added up to a second to each. The task is
 * submitted late in a second, where that second's start lies 0.7 s back.
 */

/** One histogram's sum and count, from a scrape. */
async function histogram(app: TestApp, name: string): Promise<{ sum: number; count: number }> {
  const text = await (await fetch(`${app.url}/metrics`)).text();
  const read = (part: string) =>
    Number(new RegExp(`^${name}_${part}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)?.[1] ?? NaN);
  return { sum: read("sum"), count: read("count") };
}

/** Waits for the 700th millisecond of a second: its start lies 0.7 s back. */
async function lateInASecond(): Promise<void> {
  const at = Date.now() % 1000;
  await new Promise((resolve) => setTimeout(resolve, (1700 - at) % 1000));
}

describe("task timing metrics", () => {
  it("count a task's queue wait and run time from their milliseconds, not whole seconds", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "ok", delayMs: 100 });
    await lateInASecond();
    const id = await submitOk(app, { prompt: "timed", response_format: "url" });
    const done = await waitForStatus(app, id, ["completed", "failed"], slow(10_000));
    expect(done.body.status, done.text).toBe("completed");
    const wait = await histogram(app, "image_task_sidecar_task_queue_wait_seconds");
    expect(wait.count).toBe(1);
    // Milliseconds with a slot free; the old reading was 0.7 s and more.
    expect(wait.sum).toBeLessThan(slow(300) / 1000);
    const run = await histogram(app, "image_task_sidecar_task_run_duration_seconds");
    expect(run.count).toBe(1);
    expect(run.sum).toBeGreaterThanOrEqual(0.1);
    expect(run.sum).toBeLessThan(0.1 + slow(400) / 1000);
  });
});
