import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../../support/start-test-app.js";

/*
 * What an image task costs, as an operator sees it: gpt-image bills per
 * token, and a task's tokens are counted exactly as a synchronous image
 * call's: in the task, its `task.completed` line and `tokens_total`.
 */

type Line = Record<string, unknown>;
let app: TestApp;
let client: OpenAI;
const lines: Line[] = [];

beforeAll(async () => {
  const logger = pino(
    { level: "info" },
    { write: (line: string) => void lines.push(JSON.parse(line)) },
  );
  app = await startTestApp({ logger });
  client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
});
afterAll(() => app.close());

/** `tokens_total`'s image-model series, as a scrape shows them. */
async function imageTokens(): Promise<string[]> {
  const text = await (await fetch(`${app.url}/metrics`)).text();
  return text
    .split("\n")
    .filter((line) => line.includes("tokens_total{") && line.includes("gpt-image-1"));
}

describe("the usage of image tasks", () => {
  it("is in the task, its task.completed line and tokens_total, as a synchronous call's", async () => {
    const before = await imageTokens();
    expect(before).toEqual([]);
    const task = await client.post<{ id: string }>("/images/tasks", {
      body: { model: "gpt-image-1", prompt: "a lighthouse", n: 2 },
    });
    let done: { status: string; usage?: Record<string, unknown> };
    do {
      done = await client.get(`/images/tasks/${task.id}`, { query: { wait: 10 } });
    } while (done.status !== "completed" && done.status !== "failed");
    expect(done.status).toBe("completed");
    // As the channel reported it (the fake answers 10 in, 100 out per image).
    expect(done.usage).toMatchObject({ input_tokens: 10, output_tokens: 200, total_tokens: 210 });

    let completed: Line | undefined;
    for (let waited = 0; waited < 5000 && !completed; waited += 20) {
      completed = lines.find((line) => line.msg === "task.completed" && line.task_id === task.id);
      if (!completed) await sleep(20);
    }
    expect(completed).toMatchObject({ input_tokens: 10, output_tokens: 200, image_tokens: 0 });

    const series = await imageTokens();
    expect(series.find((line) => line.includes('type="input"'))).toMatch(/ 10$/);
    expect(series.find((line) => line.includes('type="output"'))).toMatch(/ 200$/);
    for (const line of series) expect(line).toContain('group="default"');

    // A synchronous image call counts the same way.
    await client.images.generate({ model: "gpt-image-1", prompt: "a lighthouse" });
    const after = await imageTokens();
    expect(after.find((line) => line.includes('type="input"'))).toMatch(/ 20$/);
    expect(after.find((line) => line.includes('type="output"'))).toMatch(/ 300$/);
  });
});
