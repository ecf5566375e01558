import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../../support/start-test-app.js";

interface Task {
  id: string;
  object: string;
  status: string;
  data?: Array<{ b64_json?: string }>;
}

// README.md and docs/image-tasks.md show the openai SDK's generic post/get reaching the task routes; keep that true.
describe("the task API through the openai SDK's generic methods", () => {
  let app: TestApp;
  beforeEach(async () => {
    app = await startTestApp();
  });
  afterEach(() => app.close());

  it("submits, polls to completion and gets a PNG", async () => {
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const task = (await client.post("/images/tasks", {
      body: { model: "gpt-image-1", prompt: "a lighthouse" },
    })) as Task;
    expect(task).toMatchObject({ object: "image.task", status: "queued" });

    let state = task;
    for (let i = 0; i < 100 && !["completed", "failed"].includes(state.status); i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      state = (await client.get(`/images/tasks/${task.id}`)) as Task;
    }
    expect(state.status).toBe("completed");
    const png = Buffer.from(state.data?.[0]?.b64_json ?? "", "base64");
    expect(png.subarray(1, 4).toString("latin1")).toBe("PNG");
  });

  it("surfaces the error envelope as the SDK's typed error", async () => {
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const error = await client
      .post("/images/tasks", { body: { model: "dall-e-3", prompt: "x" } })
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe("unsupported_model");
  });
});
