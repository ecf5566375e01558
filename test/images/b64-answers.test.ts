import { slow } from "../support/time-factor.js";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { createFileImageStore } from "../../src/images/file-image-store.js";
import { PendingImage, type TaskView } from "../../src/tasks/view/present-task.js";
import { sendTaskView } from "../../src/tasks/http/send-task-view.js";
import { STORES } from "../tasks/store-places.js";
import { call, cancelTask, getTask, submitOk, useApp, waitForStatus } from "../tasks/task-api.js";
import { imagesAnswer, noisePng } from "./noise-png.js";
import { readAll } from "./read-all.js";

/*
 * b64_json answers are streamed from the image store: the JSON a client gets
 * is whole and exact (Content-Length, every byte of every image), and the
 * service writes it in chunks rather than building it.
 */

describe.each(STORES)("b64_json answers of real-size images ($name)", ({ options }) => {
  it(
    "poll, Prefer: wait and cancel answer every image byte for byte, with Content-Length",
    async () => {
      const app = await useApp(await options());
      const images = [noisePng(), noisePng(512), noisePng()];
      app.upstream.behave("images", {
        kind: "custom",
        respond: (_req, res) => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(imagesAnswer(images));
        },
      });
      const check = (response: Awaited<ReturnType<typeof getTask>>) => {
        expect(response.status, response.text.slice(0, 300)).toBe(200);
        expect(Number(response.headers.get("content-length"))).toBe(
          Buffer.byteLength(response.text),
        );
        expect(response.body.data).toHaveLength(3);
        for (const [index, item] of response.body.data!.entries()) {
          expect(Buffer.from(item.b64_json!, "base64").equals(images[index]!)).toBe(true);
        }
      };
      const waited = await call(app, "POST", "/v1/images/tasks", {
        json: { model: "gpt-image-1", prompt: "three", n: 3 },
        headers: { prefer: "wait=20" },
      });
      check(waited);
      const id = waited.body.id;
      check(await getTask(app, id));
      check(await cancelTask(app, id));
      // A client that leaves half-way costs the service nothing lasting.
      await new Promise<void>((resolve) => {
        const req = request(`${app.url}/v1/images/tasks/${id}`, {
          headers: { authorization: `Bearer ${app.key}` },
        });
        req.on("response", (res) => {
          res.once("data", () => {
            req.destroy();
            resolve();
          });
        });
        req.end();
      });
      check(await getTask(app, id));
      const other = await submitOk(app, { prompt: "after", n: 3, response_format: "url" });
      await waitForStatus(app, other, ["completed"], 20_000);
    },
    slow(60_000),
  );
});

describe("sendTaskView", () => {
  it("writes a b64_json answer in chunks as it reads the image, never the image's base64 at once", async () => {
    const dir = await mkdtemp(join(tmpdir(), "b64-stream-"));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const store = createFileImageStore({ dir });
    const bytes = [randomBytes(3 * 1024 * 1024 + 1), randomBytes(2)];
    await store.put("2030-01-01/task_s/0.png", bytes[0]!, "image/png");
    await store.put("2030-01-01/task_s/1.png", bytes[1]!, "image/png");
    const view: TaskView = {
      id: "task_s",
      object: "image.task",
      status: "completed",
      created: 1,
      model: "gpt-image-1",
      data: bytes.map((image, index) => ({
        b64_json: new PendingImage(image.length, () => store.get(`2030-01-01/task_s/${index}.png`)),
        revised_prompt: `"quoted" ${index}`,
      })),
    };
    let largest = 0;
    const server = createServer((_req, res: ServerResponse) => {
      const write = res.write.bind(res) as (chunk: unknown) => boolean;
      res.write = ((chunk: string | Buffer) => {
        largest = Math.max(largest, Buffer.byteLength(chunk));
        return write(chunk);
      }) as typeof res.write;
      void sendTaskView(res, 200, view);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const { port } = server.address() as AddressInfo;
    const response = await new Promise<IncomingMessage>((resolve) =>
      request(`http://127.0.0.1:${port}/`, resolve).end(),
    );
    const body = (await readAll(response)).toString();
    expect(Number(response.headers["content-length"])).toBe(Buffer.byteLength(body));
    const parsed = JSON.parse(body) as {
      data: Array<{ b64_json: string; revised_prompt: string }>;
    };
    expect(parsed.data.map((item) => item.revised_prompt)).toEqual(['"quoted" 0', '"quoted" 1']);
    for (const [index, item] of parsed.data.entries()) {
      expect(Buffer.from(item.b64_json, "base64").equals(bytes[index]!)).toBe(true);
    }
    // The file store reads 256 KiB at a time: the base64 goes out a third larger, no more.
    expect(largest).toBeLessThan(512 * 1024);
  });

  it("sends a small answer in one write, and answers 404 before writing when an image is gone", async () => {
    const dir = await mkdtemp(join(tmpdir(), "b64-small-"));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const store = createFileImageStore({ dir });
    const bytes = [randomBytes(3000), randomBytes(1001)];
    const keys = ["2030-01-01/task_m/0.png", "2030-01-01/task_m/1.png"];
    for (const [index, key] of keys.entries()) await store.put(key, bytes[index]!, "image/png");
    const view: TaskView = {
      id: "task_m",
      object: "image.task",
      status: "completed",
      created: 1,
      model: "gpt-image-1",
      data: bytes.map((image, index) => ({
        b64_json: new PendingImage(image.length, () => store.get(keys[index]!)),
      })),
    };
    let writes = 0;
    const failures: unknown[] = [];
    const server = createServer((_req, res: ServerResponse) => {
      for (const method of ["write", "end"] as const) {
        const original = res[method].bind(res) as (...args: unknown[]) => unknown;
        res[method] = ((...args: unknown[]) => {
          if (args[0] !== undefined && typeof args[0] !== "function") writes += 1;
          return original(...args);
        }) as never;
      }
      sendTaskView(res, 200, view).catch((err: unknown) => {
        failures.push(err);
        res.writeHead(404).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const { port } = server.address() as AddressInfo;
    const get = () =>
      new Promise<IncomingMessage>((resolve) =>
        request(`http://127.0.0.1:${port}/`, resolve).end(),
      );

    const response = await get();
    const parsed = JSON.parse((await readAll(response)).toString()) as {
      data: Array<{ b64_json: string }>;
    };
    expect(parsed.data.map((item) => Buffer.from(item.b64_json, "base64"))).toEqual(bytes);
    expect(writes).toBe(1);

    // The second image goes while the first is still there: nothing was written yet.
    await store.delete([keys[1]!]);
    const gone = await get();
    await readAll(gone);
    expect(gone.statusCode).toBe(404);
    expect(failures).toEqual([expect.objectContaining({ code: "task_not_found" })]);
  });
});
