import OpenAI from "openai";
import type { Stream } from "openai/streaming";
import { describe, expect, it } from "vitest";
import type { TaskJson } from "../task-api.js";
import { cancelTask, useApp, waitForStatus } from "../task-api.js";

type TaskEvents = Stream<{ event: string; data: TaskJson }>;

// A task's events read as docs/image-tasks.md shows, with the openai SDK's own stream reader.
describe("task events with the openai SDK", () => {
  it("reads the events of a task as they come, and ends after the final one", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "ok", delayMs: 300 });
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const task = await client.post<TaskJson>("/images/tasks", {
      body: { model: "gpt-image-1", prompt: "a lighthouse", response_format: "url" },
    });
    const events = await client.get<TaskEvents>(`/images/tasks/${task.id}/events`, {
      stream: true,
      __synthesizeEventData: true,
    });
    const seen: Array<[string, string]> = [];
    let last: TaskJson | undefined;
    for await (const { event, data } of events) {
      seen.push([event, data.status]);
      last = data;
    }
    expect(seen.at(-1)).toEqual(["image.task.completed", "completed"]);
    expect(seen.map(([event]) => event)).toContain("image.task.in_progress");
    expect(last?.data?.[0]?.url).toMatch(/\/v1\/images\/files\/task_/);
  });

  it("ends a cancelled task's stream with an APIError carrying the task's error code", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "hang" });
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const task = await client.post<TaskJson>("/images/tasks", {
      body: { model: "gpt-image-1", prompt: "never drawn" },
    });
    await waitForStatus(app, task.id, ["in_progress"]);
    const events = await client.get<TaskEvents>(`/images/tasks/${task.id}/events`, {
      stream: true,
      __synthesizeEventData: true,
    });
    const reading = (async () => {
      const seen: string[] = [];
      for await (const { event } of events) {
        seen.push(event);
        if (event === "image.task.in_progress") await cancelTask(app, task.id);
      }
      return seen;
    })();
    const error = await reading.then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe("cancelled");
  });
});
