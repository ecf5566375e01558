import { describe, expect, it } from "vitest";
import { createSessionState, formFromTask, parseForm } from "../../console/src/form-state.js";
import { buildSubmission } from "../../console/src/task-form.js";
import type { Task } from "../../console/src/task-types.js";

const task: Task = {
  id: "task_AAAAAAAAAAAAAAAAAAAAAA",
  object: "image.task",
  status: "completed",
  created: 1_767_225_600,
  model: "gpt-image-1.5",
  kind: "generation",
  prompt: "a fox\nin the snow",
  parameters: {
    size: "1024x1536",
    quality: "high",
    n: 3,
    background: "transparent",
    output_format: "webp",
    output_compression: 80,
    moderation: "low",
    partial_images: 2,
    response_format: "b64_json",
  },
};

function memoryStorage() {
  const items = new Map<string, string>();
  return {
    items,
    getItem: (name: string) => items.get(name) ?? null,
    setItem: (name: string, value: string) => void items.set(name, value),
    removeItem: (name: string) => void items.delete(name),
  };
}

describe("make it again: the form from a task", () => {
  it("fills every kept parameter, and submitting it asks for the same task", () => {
    const fields = formFromTask(task);
    expect(fields).toMatchObject({
      mode: "generate",
      model: "gpt-image-1.5",
      prompt: "a fox\nin the snow",
      size: "1024x1536",
      quality: "high",
      n: "3",
      background: "transparent",
      outputFormat: "webp",
      outputCompression: "80",
      moderation: "low",
      partialImages: "2",
      responseFormat: "b64_json",
      // Not kept with a task: left empty.
      style: "",
      user: "",
      webhookUrl: "",
    });
    const built = buildSubmission({ ...fields, images: [] });
    expect(built).toEqual({
      ok: true,
      submission: {
        kind: "generate",
        body: {
          model: "gpt-image-1.5",
          prompt: "a fox\nin the snow",
          ...task.parameters,
        },
      },
    });
  });

  it("makes an edit an edit again, its images to pick again; no partials when none were asked", () => {
    const editTask: Task = {
      ...task,
      kind: "edit",
      parameters: { input_fidelity: "high", response_format: "url" },
    };
    const fields = formFromTask(editTask);
    expect(fields).toMatchObject({
      mode: "edit",
      inputFidelity: "high",
      partialImages: "0",
      n: "1",
      size: "",
    });
    const built = buildSubmission({ ...fields, images: [] });
    expect(built).toEqual({
      ok: false,
      problems: [{ field: "images", message: "Pick at least one image to edit." }],
    });
  });
});

describe("what a reload keeps", () => {
  it("keeps the form and the task being watched in the tab's storage, and forgets both", () => {
    const storage = memoryStorage();
    const state = createSessionState(storage);
    expect(state.form()).toBeUndefined();
    expect(state.liveTask()).toBeUndefined();
    const fields = formFromTask(task);
    state.saveForm(fields);
    state.saveLiveTask(task.id);
    expect(state.form()).toEqual(fields);
    expect(state.liveTask()).toBe(task.id);
    state.saveLiveTask(undefined);
    expect(state.liveTask()).toBeUndefined();
    state.saveLiveTask(task.id);
    state.clear();
    expect(storage.items.size).toBe(0);
  });

  it("takes only text fields it knows, and no id that is not a task's", () => {
    expect(parseForm('{"prompt":"p","mode":"steal","images":["x"],"n":3,"size":"auto"}')).toEqual({
      prompt: "p",
      size: "auto",
    });
    expect(parseForm("not json")).toBeUndefined();
    expect(parseForm("null")).toBeUndefined();
    const storage = memoryStorage();
    storage.setItem("image-task-sidecar.live-task", "<script>");
    expect(createSessionState(storage).liveTask()).toBeUndefined();
  });

  it("survives a storage that refuses", () => {
    const refusing = {
      getItem: (): string | null => {
        throw new Error("denied");
      },
      setItem: () => {
        throw new Error("denied");
      },
      removeItem: () => {
        throw new Error("denied");
      },
    };
    const state = createSessionState(refusing);
    expect(() => state.saveForm(formFromTask(task))).not.toThrow();
    expect(state.form()).toBeUndefined();
    expect(() => state.clear()).not.toThrow();
  });
});
