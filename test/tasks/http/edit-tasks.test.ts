import { readdir } from "node:fs/promises";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import type { RecordedRequest } from "../../support/fake-upstream.js";
import { imagesDirOf, listKeys } from "../../support/redis.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";

/** The input images in the image store (a directory) of the apps on `prefix`. */
async function inputFiles(prefix: string): Promise<string[]> {
  const files = await readdir(imagesDirOf(prefix), { recursive: true }).catch(() => []);
  return files.filter((file) => /(^|\/)input-\d+\.\w+$/.test(file));
}
import { STORES } from "../store-places.js";
import {
  PNG_MAGIC,
  call,
  cancelTask,
  expectError,
  getTask,
  useApp,
  waitForStatus,
  waitUntil,
  type ApiResponse,
  type TaskJson,
  type Target,
} from "../task-api.js";

/** Distinct small PNGs, so that each part can be told apart at the channel. */
function png(seed: number): Buffer {
  return encodePng({
    width: 3,
    height: 2,
    channels: 3,
    pixels: Uint8Array.from({ length: 18 }, (_, i) => (i * 31 + seed * 7) & 0xff),
  });
}
/** A JPEG's first bytes are all the type check reads. */
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46, 0, 1, 2, 3]);

type Part = [name: string, value: string | Buffer, filename?: string];

/** `POST /v1/images/edits/tasks` as multipart, as `curl -F` or a browser sends it. */
async function submitForm(
  target: Target,
  parts: Part[],
  headers: Record<string, string> = {},
): Promise<ApiResponse> {
  const form = new FormData();
  for (const [name, value, filename] of parts) {
    if (typeof value === "string") form.append(name, value);
    else form.append(name, new Blob([value], { type: "image/png" }), filename ?? "in.png");
  }
  return send(target, form, headers);
}

async function send(
  target: Target,
  body: FormData | string,
  headers: Record<string, string> = {},
): Promise<ApiResponse> {
  const response = await fetch(`${target.url}/v1/images/edits/tasks`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${target.key}`,
      ...(typeof body === "string" ? { "content-type": "application/json" } : {}),
      ...headers,
    },
    body,
  });
  const text = await response.text();
  let parsed = {} as TaskJson;
  try {
    parsed = JSON.parse(text) as TaskJson;
  } catch {
    // not JSON; `text` tells
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

const dataUrl = (bytes: Buffer, type = "image/png") =>
  `data:${type};base64,${bytes.toString("base64")}`;

/** The parts of the last edit the channel received. */
function lastEdit(requests: RecordedRequest[]): RecordedRequest {
  const edits = requests.filter((request) => request.path === "/v1/images/edits");
  expect(edits.length).toBeGreaterThan(0);
  return edits.at(-1)!;
}

describe.each(STORES)("edits as tasks on $name", ({ name, options }) => {
  it("takes OpenAI's multipart edit body and sends the same images to the channel's /images/edits", async () => {
    const app = await useApp(await options());
    const images = [png(1), png(2)];
    const mask = png(3);
    const submitted = await submitForm(app, [
      ["model", "gpt-image-1"],
      ["image[]", images[0]!, "first.png"],
      ["prompt", "add a hat"],
      ["image[]", images[1]!, "second.png"],
      ["mask", mask, "mask.png"],
      ["n", "2"],
      ["size", "1024x1024"],
      ["input_fidelity", "high"],
      ["response_format", "url"],
    ]);
    expect(submitted.status, submitted.text).toBe(202);
    expect(submitted.body).toMatchObject({ object: "image.task", status: "queued" });
    expect(submitted.headers.get("location")).toBe(
      `${app.url}/v1/images/tasks/${submitted.body.id}`,
    );

    const done = await call(app, "GET", `/v1/images/tasks/${submitted.body.id}?wait=20`);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.data).toHaveLength(2);
    const image = await fetch(done.body.data![0]!.url!);
    expect(Buffer.from(await image.arrayBuffer()).subarray(0, 8)).toEqual(PNG_MAGIC);

    const edit = lastEdit(app.upstream.requests);
    expect(edit.method).toBe("POST");
    expect(edit.headers["content-type"]).toMatch(/^multipart\/form-data; boundary=/);
    expect(edit.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    const files = edit.parts!.filter((part) => part.filename !== undefined);
    expect(files.map((part) => part.name)).toEqual(["image[]", "image[]", "mask"]);
    expect(files.map((part) => part.data)).toEqual([...images, mask]);
    expect(files.map((part) => part.contentType)).toEqual(["image/png", "image/png", "image/png"]);
    expect(files.map((part) => part.filename)).toEqual(["image-0.png", "image-1.png", "mask.png"]);
    expect(edit.body).toEqual({
      model: "gpt-image-1",
      prompt: "add a hat",
      n: "2",
      size: "1024x1024",
      input_fidelity: "high",
    });

    // Listed, waited for and cancelled like any task; its images are gone once it finished.
    const listed = await call(app, "GET", "/v1/images/tasks");
    expect(listed.text).toContain(submitted.body.id);
    if (name === "redis") {
      const keys = await listKeys(app.config.store.prefix);
      expect(keys.filter((key) => key.includes("::input:"))).toEqual([]);
    }
  });

  it("takes JSON with data: URLs, keeps the images until the task finishes, and cancels", async () => {
    const app = await useApp({ ...(await options()), imageTasks: { maxConcurrent: 1 } });
    app.upstream.behave("edits", { kind: "hang" });
    const one = png(4);
    const first = await send(
      app,
      JSON.stringify({
        model: "gpt-image-1",
        prompt: "one image",
        images: [{ image_url: dataUrl(one) }],
        mask: { image_url: dataUrl(png(5)) },
      }),
    );
    expect(first.status, first.text).toBe(202);
    const second = await send(
      app,
      JSON.stringify({
        model: "gpt-image-1",
        prompt: "two images",
        images: [{ image_url: dataUrl(png(6)) }, { image_url: dataUrl(JPEG, "image/jpeg") }],
      }),
    );
    expect(second.status, second.text).toBe(202);
    await waitUntil(() => app.upstream.inFlight === 1, "the first edit to reach the channel");
    const edit = lastEdit(app.upstream.requests);
    const files = edit.parts!.filter((part) => part.filename !== undefined);
    expect(files.map((part) => [part.name, part.contentType])).toEqual([
      ["image", "image/png"],
      ["mask", "image/png"],
    ]);
    expect(files[0]!.data).toEqual(one);

    if (name === "redis") {
      // Kept in the image store while the task is unfinished; Redis holds the record only.
      expect(await inputFiles(app.config.store.prefix)).toHaveLength(4);
      const inRedis = (await listKeys(app.config.store.prefix)).filter((k) =>
        k.includes("::input:"),
      );
      expect(inRedis).toEqual([]);
    }
    expect((await cancelTask(app, second.body.id)).body).toMatchObject({
      status: "failed",
      error: { code: "cancelled" },
    });
    expect((await cancelTask(app, first.body.id)).body.status).toBe("failed");
    if (name === "redis") {
      const prefix = app.config.store.prefix;
      await waitUntil(
        async () => (await inputFiles(prefix)).length === 0,
        "the finished edits' input images to be deleted",
      );
    }

    // The second image of a JSON edit goes on as image[] with its own type.
    app.upstream.behave("edits", { kind: "ok" });
    const third = await send(
      app,
      JSON.stringify({
        model: "gpt-image-1",
        prompt: "again",
        images: [{ image_url: dataUrl(png(6)) }, { image_url: dataUrl(JPEG, "image/jpeg") }],
      }),
      { Prefer: "wait=20" },
    );
    expect(third.status, third.text).toBe(200);
    expect(third.body.data![0]!.b64_json).toBeTruthy();
    const parts = lastEdit(app.upstream.requests).parts!.filter((part) => part.filename);
    expect(parts.map((part) => [part.name, part.contentType, part.filename])).toEqual([
      ["image[]", "image/png", "image-0.png"],
      ["image[]", "image/jpeg", "image-1.jpeg"],
    ]);
    expect(parts[1]!.data).toEqual(JPEG);
  });
});

describe("edits as tasks: bad input (memory)", () => {
  it("refuses what OpenAI's edit route would, naming the field", async () => {
    const app = await useApp();
    const image = png(1);
    const base: Part[] = [
      ["model", "gpt-image-1"],
      ["prompt", "p"],
      ["image", image],
    ];
    const form = async (parts: Part[], code: string, param: string | null, status = 400) =>
      expectError(await submitForm(app, parts), status, code, param);

    await form([...base, ["prompt", "again"]], "invalid_value", "prompt");
    await form([...base, ["model", "gpt-image-1"]], "invalid_value", "model");
    await form([...base, ["mask", image], ["mask", image]], "invalid_value", "mask");
    await form([...base.slice(0, 2), ["image", "not a file"]], "invalid_value", "image");
    await form(
      [...base.slice(0, 2), ["image", Buffer.from("plain text, no image")]],
      "invalid_value",
      "image",
    );
    await form([...base, ["mask", Buffer.from("GIF89a....")]], "invalid_value", "mask");
    await form(base.slice(0, 2), "missing_required_parameter", "image");
    await form([["model", "gpt-image-1"], base[2]!], "missing_required_parameter", "prompt");
    await form(
      [...base.slice(0, 2), ...Array.from({ length: 17 }, (): Part => ["image[]", image])],
      "invalid_value",
      "image",
    );
    await form([...base, ["photo", image]], "invalid_value", "photo");
    await form([...base, ["n", "two"]], "invalid_value", "n");
    await form([...base, ["stream", "true"]], "invalid_value", "stream");
    await form([["model", "dall-e-2"], ...base.slice(1)], "unsupported_model", "model");
    await form([...base, ["webhook_url", "http://127.0.0.1/"]], "invalid_value", "webhook_url");
    // A part without a name (`name=""`): busboy gives it none, which once threw out of the
    // parser's listener and ended the process.
    await form([...base, ["", image]], "invalid_value", null);
    await form([...base, ["", "a field"]], "invalid_value", null);

    const json = async (body: unknown, code: string, param: string | null) =>
      expectError(await send(app, JSON.stringify(body)), 400, code, param);
    const fields = { model: "gpt-image-1", prompt: "p" };
    await json(fields, "missing_required_parameter", "images");
    await json({ ...fields, images: "x" }, "invalid_value", "images");
    await json({ ...fields, images: [] }, "missing_required_parameter", "image");
    await json(
      { ...fields, images: [{ image_url: "https://example.com/a.png" }] },
      "invalid_value",
      "images[0].image_url",
    );
    await json(
      { ...fields, images: [{ file_id: "file-abc" }] },
      "invalid_value",
      "images[0].image_url",
    );
    await json(
      { ...fields, images: [{ image_url: "data:image/png;base64,!!!" }] },
      "invalid_value",
      "images[0].image_url",
    );
    await json(
      { ...fields, images: [{ image_url: dataUrl(Buffer.from("text")) }] },
      "invalid_value",
      "image",
    );
    await json(
      { ...fields, images: [{ image_url: dataUrl(image) }], mask: "x" },
      "invalid_value",
      "mask.image_url",
    );
    expectError(await send(app, "{not json"), 400, "invalid_json");
    expect(app.upstream.requests).toHaveLength(0);
  });

  it("bounds the body by server.maxUploadBytes (413) and refuses a changed image under one Idempotency-Key", async () => {
    const app = await useApp({
      config: { server: { port: 0, host: "127.0.0.1", maxUploadBytes: 64 * 1024 } },
    });
    const big = Buffer.concat([png(1), Buffer.alloc(80 * 1024, 1)]);
    const tooLarge = await submitForm(app, [
      ["model", "gpt-image-1"],
      ["prompt", "big"],
      ["image", big],
    ]);
    expectError(tooLarge, 413, "request_too_large");
    // Streamed without a length: cut as it arrives.
    const streamed = await fetch(`${app.url}/v1/images/edits/tasks`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${app.key}`,
        "content-type": "multipart/form-data; boundary=xyz",
      },
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(
            new TextEncoder().encode(
              '--xyz\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n\r\n',
            ),
          );
          for (let i = 0; i < 20; i++) controller.enqueue(new Uint8Array(8 * 1024));
          controller.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect(((await streamed.json()) as { error: { code: string } }).error.code).toBe(
      "request_too_large",
    );
    expectError(
      await send(
        app,
        JSON.stringify({
          model: "gpt-image-1",
          prompt: "p",
          images: [{ image_url: dataUrl(big) }],
        }),
      ),
      413,
      "request_too_large",
    );

    const headers = { "Idempotency-Key": "edit-1" };
    const parts = (image: Buffer): Part[] => [
      ["model", "gpt-image-1"],
      ["prompt", "same prompt"],
      ["image", image],
    ];
    const first = await submitForm(app, parts(png(1)), headers);
    expect(first.status, first.text).toBe(202);
    const replay = await submitForm(app, parts(png(1)), headers);
    expect(replay.body.id).toBe(first.body.id);
    expectError(await submitForm(app, parts(png(2)), headers), 409, "idempotency_key_conflict");
    await waitForStatus(app, first.body.id, ["completed"]);
    expect((await getTask(app, first.body.id)).body.data).toHaveLength(1);
  });

  it("works with the openai SDK's generic post (JSON with a data: URL)", async () => {
    const app = await useApp();
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL });
    const task = await client.post<TaskJson>("/images/edits/tasks", {
      body: { model: "gpt-image-1", prompt: "sdk edit", images: [{ image_url: dataUrl(png(9)) }] },
      headers: { Prefer: "wait=20" },
    });
    expect(task.status).toBe("completed");
    expect(lastEdit(app.upstream.requests).body).toMatchObject({ prompt: "sdk edit" });
  });
});
