import { expect } from "vitest";
import { call, type ApiResponse, type TaskJson } from "../task-api.js";
import { MODELS, endWithinMs } from "./chaos-checks.js";
import { isControl } from "./chaos-control.js";
import type { TaskPlaces } from "./chaos-tasks.js";

/**
 * Task `n` submitted through sub2api's route (even `n`) or Bifrost's (odd) to `here`, and polled
 * there on `there` until it ended: every answer in the dialect's shape (sub2api's always 200,
 * Bifrost's 202 until the job ended), a task its channel answered well completed. The end, with
 * Bifrost's error unwrapped (`error.error`) for the shared checks.
 */
export async function runDialectTask(
  n: number,
  { here, there, onAccepted }: TaskPlaces,
  story: (n: number) => string,
  seen: string[],
): Promise<{ n: number; answer: ApiResponse }> {
  const sub2api = n % 2 === 0;
  const model = MODELS[n % MODELS.length]!;
  const submitted = await call(
    here,
    "POST",
    sub2api ? "/v1/images/generations/async" : "/v1/async/images/generations",
    { json: { model, prompt: `chaos #${n} a lighthouse`, response_format: "url" } },
  );
  seen.push(submitted.text);
  expect(submitted.status, submitted.text).toBe(202);
  onAccepted?.();
  const path = sub2api
    ? `/v1/images/tasks/${submitted.body.id}`
    : `/v1/async/images/generations/${submitted.body.id}`;
  const deadline = Date.now() + endWithinMs();
  for (;;) {
    const answer = await call(there, "GET", path);
    seen.push(answer.text);
    const ended = answer.body.status === "completed" || answer.body.status === "failed";
    expect(answer.status, answer.text).toBe(sub2api || ended ? 200 : 202);
    if (ended) {
      const what = `${story(n)}; the task: ${answer.text.slice(0, 400)}`;
      if (isControl(n)) expect(answer.body.status, what).toBe("completed");
      const inner = (answer.body.error as { error?: TaskJson["error"] } | undefined)?.error;
      return {
        n,
        answer: sub2api ? answer : { ...answer, body: { ...answer.body, error: inner } },
      };
    }
    if (Date.now() > deadline) throw new Error(`${path} still ${answer.body.status}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
