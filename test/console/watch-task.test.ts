import { describe, expect, it } from "vitest";
import { ApiError, type Api } from "../../console/src/api.js";
import type { Task } from "../../console/src/task-types.js";
import { applyEvent, watchTask, type WatchState } from "../../console/src/watch-task.js";

const ID = "task_AAAAAAAAAAAAAAAAAAAAAA";
const base: Task = { id: ID, object: "image.task", status: "queued", created: 1, model: "m" };
const at = (status: Task["status"], extra: Partial<Task> = {}): Task => ({
  ...base,
  status,
  ...extra,
});
const sse = (id: string, event: string, task: Task) =>
  `id: ${id}\nevent: image.task.${event}\ndata: ${JSON.stringify(task)}\n\n`;

describe("applyEvent", () => {
  it("shows the partial image an event names, and none once a new run starts or the task ends", () => {
    let state: WatchState = { task: base };
    const partials = [
      { index: 0, url: "http://h/p0.png" },
      { index: 1, url: "http://h/p1.png" },
    ];
    state = applyEvent(state, {
      id: "1.1",
      event: "image.task.partial_image",
      data: JSON.stringify(at("in_progress", { partial_images: partials, partial_image_index: 0 })),
    });
    expect(state.partial).toEqual(partials[0]);
    expect(state.lastEventId).toBe("1.1");
    const rerun = applyEvent(state, {
      id: "2.0",
      event: "image.task.in_progress",
      data: JSON.stringify(at("in_progress")),
    });
    expect(rerun.partial).toBeUndefined();
    const done = applyEvent(state, {
      id: "final",
      event: "image.task.completed",
      data: JSON.stringify(at("completed", { data: [{ url: "http://h/0.png" }] })),
    });
    expect(done).toEqual({
      task: at("completed", { data: [{ url: "http://h/0.png" }] }),
      lastEventId: "final",
    });
  });

  it("ignores events of other kinds and of other tasks", () => {
    const state: WatchState = { task: base };
    expect(applyEvent(state, { event: "message", data: "{}" })).toBe(state);
    const other = JSON.stringify({ ...at("completed"), id: "task_BBBBBBBBBBBBBBBBBBBBBB" });
    expect(applyEvent(state, { event: "image.task.completed", data: other })).toBe(state);
  });
});

/** An API whose event streams are the given texts, one per request, recording `Last-Event-ID`s. */
function streamingApi(streams: Array<string | ApiError>) {
  const resumedAfter: Array<string | undefined> = [];
  const api = {
    async events(_id: string, lastEventId: string | undefined) {
      resumedAfter.push(lastEventId);
      const next = streams.shift();
      if (next === undefined) throw new Error("no more streams");
      if (next instanceof ApiError) throw next;
      return new Response(next, { headers: { "content-type": "text/event-stream" } });
    },
  } as unknown as Api;
  return { api, resumedAfter };
}

describe("watchTask", () => {
  it("resumes a stream that broke off after the last event it saw, and ends at the final one", async () => {
    const { api, resumedAfter } = streamingApi([
      sse("0", "queued", at("queued")) + sse("1.0", "in_progress", at("in_progress")),
      "", // a reconnection that gets nothing: tried again
      sse("final", "completed", at("completed", { data: [{ url: "http://h/0.png" }] })),
    ]);
    const seen: string[] = [];
    const final = await watchTask({
      api,
      task: base,
      onChange: (state) => seen.push(state.task.status),
      signal: new AbortController().signal,
      retryDelaysMs: [0],
    });
    expect(seen).toEqual(["queued", "in_progress", "completed"]);
    expect(resumedAfter).toEqual([undefined, "1.0", "1.0"]);
    expect(final.task.status).toBe("completed");
  });

  it("gives up when the API refuses (the task expired) or the stream stays away", async () => {
    const gone = new ApiError(404, "task_not_found", "No task found.");
    const refused = streamingApi([gone]);
    await expect(
      watchTask({
        api: refused.api,
        task: base,
        onChange: () => {},
        signal: new AbortController().signal,
      }),
    ).rejects.toBe(gone);

    const silent = streamingApi(["", "", ""]);
    await expect(
      watchTask({
        api: silent.api,
        task: base,
        onChange: () => {},
        signal: new AbortController().signal,
        retryDelaysMs: [0],
        maxAttempts: 3,
      }),
    ).rejects.toMatchObject({ code: "network_error" });
    expect(silent.resumedAfter).toHaveLength(3);
  });

  it("stops when its page goes away", async () => {
    const controller = new AbortController();
    const { api } = streamingApi(["", "", "", "", ""]);
    const watching = watchTask({
      api,
      task: base,
      onChange: () => {},
      signal: controller.signal,
      retryDelaysMs: [60_000],
    });
    setTimeout(() => controller.abort(), 10);
    await expect(watching).rejects.toMatchObject({ name: "AbortError" });
  });
});
