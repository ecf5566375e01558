import { randomBytes } from "node:crypto";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import OpenAI from "openai";
import type { Stream } from "openai/streaming";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import { startServer } from "../../../src/server.js";
import { TEST_KEYS, testConfig } from "../../support/start-test-app.js";
import { useTempDir, waitUntil, type TaskJson } from "../task-api.js";

type ShownTask = TaskJson & {
  kind?: string;
  prompt?: string;
  parameters?: Record<string, unknown>;
  partial_images?: unknown;
};
type TaskEvents = Stream<{ event: string; data: ShownTask }>;

/**
 * The service on the demo channel (it streams partial images), logging every line at debug
 * level into `lines`, as JSON lines, the way the service writes them.
 */
async function startLoggedService(imagesDir?: string) {
  const lines: string[] = [];
  const logger = pino({ level: "debug" }, { write: (line: string) => void lines.push(line) });
  const config = testConfig("http://127.0.0.1:9/v1", {
    config: {
      channels: [{ name: "demo", type: "demo", models: ["gpt-image-1"], imageDelayMs: 150 }],
      ...(imagesDir ? { images: { url: `file://${imagesDir}` } } : {}),
    },
  });
  const server = await startServer({ config, logger, defaultMetrics: false });
  onTestFinished(() => server.close(500));
  const client = (key: string) =>
    new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0 });
  return { lines, owner: client(TEST_KEYS.default), other: client(TEST_KEYS.other) };
}

const PNG = encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12).fill(90) });

describe("a task's prompt and parameters", () => {
  it("are shown to its owner on GET, in the list and in every event, and never logged", async () => {
    const { lines, owner, other } = await startLoggedService();
    const marker = randomBytes(6).toString("hex");
    const prompt = `a lighthouse ${marker} with "quotes" and <b>markup</b>`;
    const endUser = `end-user-${marker}`;
    const submitted = await owner.post<ShownTask>("/images/tasks", {
      body: {
        model: "gpt-image-1",
        prompt,
        size: "1024x1536",
        quality: "hd",
        n: 2,
        background: "opaque",
        output_format: "png",
        output_compression: 77,
        moderation: "low",
        partial_images: 1,
        response_format: "url",
        user: endUser,
      },
    });
    // The submission's answer stays as small as it was.
    expect(Object.keys(submitted).sort()).toEqual(["created", "id", "model", "object", "status"]);

    const shown = {
      kind: "generation",
      prompt,
      parameters: {
        size: "1024x1536",
        quality: "high", // as sent to the channel: gpt-image models call `hd` `high`
        n: 2,
        background: "opaque",
        output_format: "png",
        output_compression: 77,
        moderation: "low",
        partial_images: 1,
        response_format: "url",
      },
    };
    const events = await owner.get<TaskEvents>(`/images/tasks/${submitted.id}/events`, {
      stream: true,
      __synthesizeEventData: true,
    });
    const seen: string[] = [];
    for await (const { event, data } of events) {
      seen.push(event);
      expect(data, event).toMatchObject(shown);
      expect(data.parameters, event).toEqual(shown.parameters);
      expect(JSON.stringify(data)).not.toContain(endUser);
    }
    expect(seen).toContain("image.task.partial_image");
    expect(seen.at(-1)).toBe("image.task.completed");

    const polled = await owner.get<ShownTask>(`/images/tasks/${submitted.id}`);
    expect(polled).toMatchObject({ status: "completed", ...shown });
    expect(polled.parameters).toEqual(shown.parameters);
    expect(JSON.stringify(polled)).not.toContain(endUser);

    const list = await owner.get<{ data: ShownTask[] }>("/images/tasks");
    const listed = list.data.find((task) => task.id === submitted.id);
    expect(listed).toMatchObject(shown);
    expect(JSON.stringify(list)).not.toContain(endUser);

    // Another key sees neither the task nor its prompt.
    const refused = await other.get(`/images/tasks/${submitted.id}`).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.NotFoundError);
    const othersList = await other.get<{ data: ShownTask[] }>("/images/tasks");
    expect(JSON.stringify(othersList)).not.toContain(marker);

    for (const line of lines) expect(line).not.toContain(marker);
  });

  it("are not written to the lines logged about the task when it goes wrong", async () => {
    const dir = await useTempDir();
    const imagesDir = join(dir, "images");
    const { lines, owner } = await startLoggedService(imagesDir);
    // The image store's directory turns into a file: every write of the task's images fails.
    await rm(imagesDir, { recursive: true, force: true });
    await writeFile(imagesDir, "not a directory");
    const marker = randomBytes(6).toString("hex");
    const task = await owner.post<ShownTask>("/images/tasks", {
      body: {
        model: "gpt-image-1",
        prompt: `a lighthouse ${marker}`,
        partial_images: 2,
        user: `end-user-${marker}`,
        response_format: "url",
      },
    });
    // A directory that cannot be written is refused for good: the task fails at once.
    await waitUntil(
      () =>
        lines.some(
          (line) => line.includes(task.id) && line.includes("the image store refused a task's"),
        ),
      "the failed image writes to be logged",
    );
    await owner.post(`/images/tasks/${task.id}/cancel`);
    const cancelled = await owner.get<ShownTask>(`/images/tasks/${task.id}`);
    expect(cancelled).toMatchObject({ status: "failed", prompt: `a lighthouse ${marker}` });

    const logged = lines.filter((line) => line.includes(task.id));
    expect(logged.length).toBeGreaterThan(1); // the partial images' and the result's failures
    for (const line of lines) expect(line).not.toContain(marker);
  });

  it("name an edit as such, with only the parameters that were given", async () => {
    const { lines, owner } = await startLoggedService();
    const marker = randomBytes(6).toString("hex");
    const prompt = `add a red hat ${marker}`;
    const task = await owner.post<ShownTask>("/images/edits/tasks", {
      body: {
        model: "gpt-image-1",
        prompt,
        input_fidelity: "high",
        images: [{ image_url: `data:image/png;base64,${PNG.toString("base64")}` }],
      },
      headers: { Prefer: "wait=30" },
    });
    const done =
      task.status === "completed"
        ? task
        : await owner.get<ShownTask>(`/images/tasks/${task.id}`, { query: { wait: 30 } });
    expect(done).toMatchObject({ status: "completed", kind: "edit", prompt });
    // `n` is 1 when not given; `response_format` is always known.
    expect(done.parameters).toEqual({ n: 1, input_fidelity: "high", response_format: "b64_json" });
    for (const line of lines) expect(line).not.toContain(marker);
  });
});
