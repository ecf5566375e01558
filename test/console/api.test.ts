import { describe, expect, it, onTestFinished } from "vitest";
import { ApiError, createApi } from "../../console/src/api.js";
import type { Task } from "../../console/src/task-types.js";
import { watchTask, type WatchState } from "../../console/src/watch-task.js";
import { DEMO_KEY, startDemoService } from "./console-browser.js";

async function useService(imageDelayMs: number) {
  const server = await startDemoService(imageDelayMs);
  onTestFinished(() => server.close(200));
  return { server, api: createApi({ base: `${server.url}/v1/`, key: DEMO_KEY }) };
}

// The console's API client and watcher in Node, against the real service on the demo channel.
describe("the console's API client", () => {
  it("lists models, submits, follows a task live to its result, lists and reads it", async () => {
    const { api } = await useService(400);
    expect(await api.models()).toContain("gpt-image-1");
    const submitted = await api.submit({
      model: "gpt-image-1",
      prompt: "a lighthouse",
      partial_images: 2,
      response_format: "url",
    });
    expect(submitted.status).toBe("queued");
    const states: WatchState[] = [];
    const final = await watchTask({
      api,
      task: submitted,
      onChange: (state) => states.push(state),
      signal: new AbortController().signal,
    });
    const firstPartial = states.findIndex((state) => state.partial?.url);
    const completed = states.findIndex((state) => state.task.status === "completed");
    expect(firstPartial).toBeGreaterThanOrEqual(0);
    expect(firstPartial).toBeLessThan(completed);
    expect(final.task).toMatchObject({ status: "completed", prompt: "a lighthouse" });
    expect(final.task.data?.[0]?.url).toMatch(/\/v1\/images\/files\//);

    const page = await api.list({ limit: 10, status: "completed" });
    expect(page.data.map((task: Task) => task.id)).toContain(submitted.id);
    // Oldest first: a second task comes after the first.
    const second = await api.submit({ model: "gpt-image-1", prompt: "a harbour" });
    const ids = async (order?: "asc") =>
      (await api.list({ limit: 10, ...(order ? { order } : {}) })).data.map(
        (task: Task) => task.id,
      );
    expect(await ids("asc")).toEqual([submitted.id, second.id]);
    expect(await ids()).toEqual([second.id, submitted.id]);
    expect((await api.get(submitted.id)).parameters).toMatchObject({ partial_images: 2 });
  });

  it("cancels a running task", async () => {
    const { api } = await useService(600_000);
    const task = await api.submit({ model: "gpt-image-1", prompt: "never drawn" });
    const cancelled = await api.cancel(task.id);
    expect(cancelled).toMatchObject({ status: "failed", error: { code: "cancelled" } });
  });

  it("deletes a task: its images and the task answer 404 at once, a second delete too", async () => {
    const { server, api } = await useService(10);
    const task = await api.submit({ model: "gpt-image-1", prompt: "gone", response_format: "url" });
    const done = await fetch(`${server.url}/v1/images/tasks/${task.id}?wait=30`, {
      headers: { Authorization: `Bearer ${DEMO_KEY}` },
    });
    const link = ((await done.json()) as Task).data?.[0]?.url;
    expect(link).toMatch(/^http/);
    expect((await fetch(link!)).status).toBe(200);
    expect(await api.remove(task.id)).toEqual({
      id: task.id,
      object: "image.task.deleted",
      deleted: true,
    });
    await expect(api.get(task.id)).rejects.toMatchObject({ status: 404, code: "task_not_found" });
    expect((await fetch(link!)).status).toBe(404);
    await expect(api.remove(task.id)).rejects.toMatchObject({
      status: 404,
      code: "task_not_found",
    });
    await expect(api.remove("task_AAAAAAAAAAAAAAAAAAAAAA")).rejects.toMatchObject({
      status: 404,
      code: "task_not_found",
    });
  });

  it("turns the API's refusals into errors naming the code and the field", async () => {
    const { server, api } = await useService(10);
    const bad = await api
      .submit({ model: "gpt-image-1", prompt: "x", size: "big" })
      .catch((e) => e);
    expect(bad).toBeInstanceOf(ApiError);
    expect(bad).toMatchObject({ status: 400, code: "invalid_value", param: "size" });
    const stranger = createApi({ base: `${server.url}/v1/`, key: "sk-wrong" });
    await expect(stranger.models()).rejects.toMatchObject({ status: 401, code: "invalid_api_key" });
    const away = createApi({ base: "http://127.0.0.1:9/v1/", key: DEMO_KEY });
    await expect(away.models()).rejects.toMatchObject({ status: 0, code: "network_error" });
  });
});
