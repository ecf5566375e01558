import { randomBytes } from "node:crypto";
import { readdir } from "node:fs/promises";
import { pino } from "pino";
import { Webhook } from "standardwebhooks";
import { describe, expect, it, onTestFinished } from "vitest";
import type { ConfigInput } from "../../../src/config/config-schema.js";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { headerRecord, startWebhookReceiver } from "../../webhooks/webhook-receiver.js";
import { editForm, submitSub2apiOk } from "../dialects/dialect-api.js";
import { flatPng, scriptImageStream } from "../scripted-image-stream.js";
import { openEvents } from "../sse-client.js";
import { STORES } from "../store-places.js";
import {
  call,
  expectError,
  getTask,
  submitOk,
  useApp,
  useTempDir,
  waitForStatus,
  waitUntil,
  type Target,
} from "../task-api.js";

/*
 * DELETE /v1/images/tasks/{id}: the owner's task and its images go at once (a
 * running one is cancelled first, as any cancel); the task, its links and its
 * files are gone; every other caller, and a second DELETE, get the 404 of an
 * unknown task. And the list's signed thumbnail links for b64_json tasks.
 */

const SECRET = `whsec_${randomBytes(32).toString("base64")}`;

type Line = Record<string, unknown>;
type Item = { url?: string; b64_json?: string; thumbnail_url?: string };
type Listed = {
  id: string;
  object: string;
  data?: Item[];
  partial_images?: Array<Item & { index: number }>;
};

/** `DELETE /v1/images/tasks/{id}`. */
const deleteTask = (target: Target, id: string, key?: string | null) =>
  call(target, "DELETE", `/v1/images/tasks/${id}`, { key });

/** The files of the image directory whose path names the task. */
async function filesOf(dir: string, id: string): Promise<string[]> {
  const all = await readdir(dir, { recursive: true, withFileTypes: true });
  return all
    .filter((entry) => entry.isFile())
    .map((entry) => `${entry.parentPath}/${entry.name}`)
    .filter((path) => path.includes(id));
}

/** The key's list, by id. */
async function listed(target: Target): Promise<Map<string, Listed>> {
  const page = await call(target, "GET", "/v1/images/tasks?limit=100");
  expect(page.status, page.text).toBe(200);
  const data = (page.body as unknown as { data: Listed[] }).data;
  return new Map(data.map((task) => [task.id, task]));
}

/** Fetches a link without a bearer: its status, type and bytes. */
async function fetchLink(url: string) {
  const response = await fetch(url);
  return {
    status: response.status,
    type: response.headers.get("content-type"),
    bytes: Buffer.from(await response.arrayBuffer()),
  };
}

describe.each(STORES)("DELETE /v1/images/tasks/{id} on the $name store", ({ options }) => {
  /** An app on the store, with its images in a directory of the test's own and its lines kept. */
  async function deletingApp(config: Partial<ConfigInput> = {}) {
    const dir = await useTempDir();
    const lines: Line[] = [];
    const logger = pino(
      { level: "info" },
      { write: (line: string) => void lines.push(JSON.parse(line)) },
    );
    const app = await useApp({
      ...(await options()),
      logger,
      config: { images: { url: `file://${dir}` }, ...config },
    });
    return { app, dir, lines };
  }

  it("deletes a finished task: it, its links and its files answer 404 or are gone; a second DELETE is 404", async () => {
    const { app, dir, lines } = await deletingApp();
    const prompt = "a finished task to delete";
    const id = await submitOk(app, { prompt, response_format: "url" });
    const done = await waitForStatus(app, id, ["completed"]);
    const link = done.body.data![0]!.url!;
    expect((await fetchLink(link)).status).toBe(200);
    expect(await filesOf(dir, id)).not.toEqual([]);
    const kept = await submitOk(app, { prompt: "kept", response_format: "url" });
    await waitForStatus(app, kept, ["completed"]);

    const deleted = await deleteTask(app, id);
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.headers.get("content-type")).toMatch(/^application\/json/);
    expect(deleted.body).toEqual({ id, object: "image.task.deleted", deleted: true });

    expectError(await getTask(app, id), 404, "task_not_found", "task_id");
    expect((await fetchLink(link)).status).toBe(404);
    expect(await filesOf(dir, id)).toEqual([]);
    expect([...(await listed(app)).keys()]).toEqual([kept]);
    expectError(
      await call(app, "GET", `/v1/images/tasks?after=${id}`),
      400,
      "invalid_value",
      "after",
    );
    expectError(await deleteTask(app, id), 404, "task_not_found", "task_id");
    // Nothing is left to watch: a stream asked for now is the 404 too, at once.
    const late = await openEvents(app, `/v1/images/tasks/${id}/events`);
    expect(late.status).toBe(404);
    // The task left alone is as it was.
    expect((await getTask(app, kept)).body.status).toBe("completed");
    expect(await filesOf(dir, kept)).not.toEqual([]);

    const line = lines.find((entry) => entry.msg === "task.deleted");
    expect(line).toMatchObject({ task_id: id, key_name: expect.any(String), model: "gpt-image-1" });
    expect(JSON.stringify(lines.filter((entry) => entry.task_id === id))).not.toContain(prompt);
  });

  it("cancels a running task first: its webhook as a cancel's, its open stream ends, its partial images go", async () => {
    const receiver = await startWebhookReceiver((res) => res.writeHead(204).end());
    onTestFinished(() => receiver.close());
    const { app, dir, lines } = await deletingApp({
      webhooks: { secret: SECRET, allowPrivateNetworks: true, retryScheduleSec: [1] },
    });
    const channel = scriptImageStream(app.upstream);
    const stream = await openEvents(app, "/v1/images/tasks", {
      json: {
        model: "gpt-image-1",
        prompt: "a running task to delete",
        partial_images: 1,
        webhook_url: `${receiver.url}/hook`,
      },
    });
    const request = await channel.next();
    const id = (await stream.event(0)).json.id!;
    request.partial(0, 40);
    await waitUntil(
      () => stream.events.some((event) => event.event === "image.task.partial_image"),
      "the partial image's event",
    );
    const watcher = await openEvents(app, `/v1/images/tasks/${id}/events`);
    await watcher.event(0);
    // The list carries the partial image as a signed link (the task is b64_json).
    const partial = (await listed(app)).get(id)!.partial_images![0]!;
    expect(partial).toEqual({ index: 0, thumbnail_url: expect.any(String) });
    const thumbnail = partial.thumbnail_url!;
    expect((await fetchLink(thumbnail)).bytes.equals(flatPng(40))).toBe(true);
    expect(await filesOf(dir, id)).not.toEqual([]);

    const deleted = await deleteTask(app, id);
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body).toEqual({ id, object: "image.task.deleted", deleted: true });
    await request.gone;
    for (const events of [stream, watcher]) {
      await events.ended;
      const last = events.events.at(-1)!;
      expect(last.event).toBe("image.task.failed");
      expect(last.json).toMatchObject({ id, status: "failed", error: { code: "cancelled" } });
    }
    await receiver.received(1);
    const event = new Webhook(SECRET).verify(
      receiver.requests[0]!.body,
      headerRecord(receiver.requests[0]!.headers),
    ) as { type: string; data: Record<string, unknown> };
    expect(event.type).toBe("image.task.failed");
    expect(event.data).toMatchObject({ id, status: "failed", error: { code: "cancelled" } });

    expectError(await getTask(app, id), 404, "task_not_found");
    expect((await fetchLink(thumbnail)).status).toBe(404);
    expect(await filesOf(dir, id)).toEqual([]);
    expectError(await deleteTask(app, id), 404, "task_not_found");
    const ends = lines.filter((entry) => entry.task_id === id).map((entry) => entry.msg);
    expect(ends).toEqual(expect.arrayContaining(["task.cancelled", "task.deleted"]));
    expect(ends.indexOf("task.cancelled")).toBeLessThan(ends.indexOf("task.deleted"));
  });

  it("deletes a queued edit with its input images", async () => {
    const { app, dir } = await deletingApp({ imageTasks: { maxConcurrent: 1 } });
    app.upstream.behave("images", { kind: "hang" });
    app.upstream.behave("edits", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    const running = await submitOk(app, { prompt: "holds the only slot" });
    await arrived;
    const response = await fetch(`${app.url}/v1/images/edits/tasks`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}` },
      body: editForm({ model: "gpt-image-1", prompt: "an edit to delete" }),
    });
    expect(response.status).toBe(202);
    const { id } = (await response.json()) as { id: string };
    expect((await getTask(app, id)).body.status).toBe("queued");
    expect(await filesOf(dir, id)).not.toEqual([]);

    expect((await deleteTask(app, id)).status).toBe(200);
    expect(await filesOf(dir, id)).toEqual([]);
    expectError(await getTask(app, id), 404, "task_not_found");
    // The slot's task runs on; the deleted edit never reaches the channel.
    expect((await getTask(app, running)).body.status).toBe("in_progress");
    expect(app.upstream.requests.filter((r) => r.path.endsWith("/images/edits"))).toEqual([]);
  });

  it("answers another key's task, an unknown id and a malformed one with the 404 of an unknown task", async () => {
    const { app, dir } = await deletingApp();
    const id = await submitOk(app, { prompt: "mine", response_format: "url" });
    await waitForStatus(app, id, ["completed"]);
    const unknown = await deleteTask(app, "task_AAAAAAAAAAAAAAAAAAAAAA");
    expectError(unknown, 404, "task_not_found", "task_id");
    for (const key of [TEST_KEYS.other, TEST_KEYS.vip]) {
      const theirs = await deleteTask(app, id, key);
      expectError(theirs, 404, "task_not_found", "task_id");
      expect(theirs.body.error?.message).toBe(
        unknown.body.error?.message.replace("task_AAAAAAAAAAAAAAAAAAAAAA", id),
      );
    }
    expectError(await deleteTask(app, "not-a-task"), 404, "task_not_found");
    expectError(await deleteTask(app, id, null), 401, "missing_api_key");
    expect((await getTask(app, id)).body.status).toBe("completed");
    expect(await filesOf(dir, id)).not.toEqual([]);
  });

  it("deletes a sub2api task by its imgtask_ id", async () => {
    const { app } = await deletingApp();
    const id = await submitSub2apiOk(app, { prompt: "a sub2api task" });
    await waitForStatus(app, id, ["completed"]);
    const deleted = await deleteTask(app, id);
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body).toEqual({ id, object: "image.task.deleted", deleted: true });
    expectError(await getTask(app, id), 404, "task_not_found");
  });
});

describe("the task list's thumbnails", () => {
  it("are signed links to a b64_json task's images, loaded without a bearer; GET and events have none", async () => {
    const app = await useApp();
    const stream = await openEvents(app, "/v1/images/tasks", {
      json: { model: "gpt-image-1", prompt: "as b64", n: 2 },
    });
    await stream.ended;
    const final = stream.events.at(-1)!;
    expect(final.event).toBe("image.task.completed");
    const id = final.json.id!;
    const urlTask = await submitOk(app, { prompt: "as url", response_format: "url" });
    await waitForStatus(app, urlTask, ["completed"]);

    const polled = await getTask(app, id);
    const images = polled.body.data!;
    expect(images.length).toBeGreaterThan(0);
    for (const image of [...images, ...(final.json.data as Item[])]) {
      expect(image).not.toHaveProperty("thumbnail_url");
    }
    const list = await listed(app);
    const items = list.get(id)!.data!;
    expect(items).toHaveLength(images.length);
    for (const [index, item] of items.entries()) {
      expect(item).not.toHaveProperty("b64_json");
      expect(new URL(item.thumbnail_url!).pathname).toMatch(
        new RegExp(`^/v1/images/files/${id}/${index}\\.png$`),
      );
      const loaded = await fetchLink(item.thumbnail_url!);
      expect(loaded.status).toBe(200);
      expect(loaded.type).toBe("image/png");
      expect(loaded.bytes.equals(Buffer.from(images[index]!.b64_json!, "base64"))).toBe(true);
    }
    // A url task's items are its links, as before.
    const urlItems = list.get(urlTask)!.data!;
    expect(urlItems.every((item) => item.url && !("thumbnail_url" in item))).toBe(true);
  });
});
