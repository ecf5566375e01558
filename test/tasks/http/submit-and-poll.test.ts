import { describe, expect, it } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import { TEST_KEYS, UPSTREAM_KEY } from "../../support/start-test-app.js";
import {
  PNG_MAGIC,
  TASK_ID,
  call,
  expectNoLeak,
  getTask,
  submit,
  submitOk,
  useApp,
  waitForStatus,
  type ApiResponse,
} from "../task-api.js";

describe("POST /v1/images/tasks", () => {
  it("answers 202 at once with Location and the queued task, even while the upstream hangs", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "hang" });
    const before = Math.floor(Date.now() / 1000);

    const response = await submit(app, { prompt: "a red fox" });

    expect(response.status).toBe(202);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    const task = response.body;
    expect(task).toEqual({
      id: expect.stringMatching(TASK_ID),
      object: "image.task",
      status: "queued",
      created: expect.any(Number),
      model: "gpt-image-1",
    });
    expect(task.created).toBeGreaterThanOrEqual(before);
    expect(response.headers.get("location")).toBe(`${app.url}/v1/images/tasks/${task.id}`);

    // The Location answers the same task to its owner.
    const polled = await call(app, "GET", new URL(response.headers.get("location")!).pathname);
    expect(polled.status).toBe(200);
    expect(polled.body.id).toBe(task.id);
    expect(["queued", "in_progress"]).toContain(polled.body.status);
  });

  it("gives every task its own unguessable id", async () => {
    const app = await useApp();
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) ids.add(await submitOk(app, { prompt: `p${i}` }));
    expect(ids.size).toBe(5);
    for (const id of ids) expect(id).toMatch(TASK_ID);
  });
});

describe("GET /v1/images/tasks/{id}", () => {
  it("goes queued -> in_progress -> completed with the headers and fields of each stage", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "ok", delayMs: 1500 });

    const arrived = app.upstream.nextRequest("images");
    const submitted = await submit(app, {
      prompt: "a lighthouse at dusk",
      size: "1024x1024",
      quality: "hd",
      style: "vivid",
      user: "user-42",
      response_format: "b64_json",
    });
    expect(submitted.status).toBe(202);
    expect(submitted.body.status).toBe("queued");
    const id = submitted.body.id;

    const upstreamRequest = await arrived;
    const running = await getTask(app, id);
    expect(running.status).toBe(200);
    expect(running.body.status).toBe("in_progress");
    expect(running.headers.get("cache-control")).toBe("no-store");
    expect(Number(running.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(running.body.started_at).toEqual(expect.any(Number));
    expect(running.body).not.toHaveProperty("data");
    expect(running.body).not.toHaveProperty("completed_at");

    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.headers.get("cache-control")).toBe("no-store");
    expect(done.headers.get("retry-after")).toBeNull();
    const task = done.body;
    expect(task).toMatchObject({ id, object: "image.task", model: "gpt-image-1" });
    expect(task.started_at).toBeGreaterThanOrEqual(task.created);
    expect(task.completed_at).toBeGreaterThanOrEqual(task.started_at!);
    expect(task.expires_at).toBeGreaterThan(task.completed_at!);
    expect(task.usage).toMatchObject({ total_tokens: expect.any(Number) });
    expect(task).not.toHaveProperty("error");
    expect(task.data).toHaveLength(1);
    const image = Buffer.from(task.data![0]!.b64_json!, "base64");
    expect(image.subarray(0, 8)).toEqual(PNG_MAGIC);
    expect(task.data![0]).not.toHaveProperty("url");

    // What the channel got: its own key, the fields it takes, nothing it refuses.
    expect(upstreamRequest.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(JSON.stringify(upstreamRequest.headers)).not.toContain(TEST_KEYS.default);
    const body = upstreamRequest.body as Record<string, unknown>;
    expect(body).toMatchObject({
      model: "gpt-image-1",
      prompt: "a lighthouse at dusk",
      size: "1024x1024",
      n: 1,
      user: "user-42",
      quality: "high",
    });
    expect(body).not.toHaveProperty("response_format");
    expect(body).not.toHaveProperty("style");
    expectNoLeak(done.text);
  });

  it("returns n images for n: 2", async () => {
    const app = await useApp();
    const id = await submitOk(app, { prompt: "two cats", n: 2 });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.data).toHaveLength(2);
    for (const item of done.body.data!) {
      expect(Buffer.from(item.b64_json!, "base64").subarray(0, 8)).toEqual(PNG_MAGIC);
    }
    expect((app.upstream.requests.at(-1)!.body as { n: number }).n).toBe(2);
  });

  it("drops a quality the model does not take, also one named like an object's own property", async () => {
    const app = await useApp();
    for (const quality of ["__proto__", "constructor", "ultra"]) {
      const arrived = app.upstream.nextRequest("images");
      const id = await submitOk(app, { prompt: "a fox", quality });
      const body = (await arrived).body as Record<string, unknown>;
      expect(Object.keys(body), quality).not.toContain("quality");
      const done = await waitForStatus(app, id, ["completed", "failed"]);
      expect(done.body.status, done.text).toBe("completed");
    }
  });

  it("sends the other OpenAI image fields on as they are", async () => {
    const app = await useApp();
    const arrived = app.upstream.nextRequest("images");
    const id = await submitOk(app, {
      prompt: "a logo",
      background: "transparent",
      output_format: "webp",
      output_compression: 80,
      moderation: "low",
      quality: "not-a-quality",
    });
    const body = (await arrived).body as Record<string, unknown>;
    expect(body).toMatchObject({
      background: "transparent",
      output_format: "webp",
      output_compression: 80,
      moderation: "low",
    });
    expect(body).not.toHaveProperty("quality");
    expect((await waitForStatus(app, id, ["completed", "failed"])).body.status).toBe("completed");
  });
});

describe("response_format: url", () => {
  async function completedUrlTask(): Promise<{
    app: Awaited<ReturnType<typeof useApp>>;
    done: ApiResponse;
  }> {
    const app = await useApp();
    const id = await submitOk(app, { prompt: "a signed image", n: 2, response_format: "url" });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    return { app, done };
  }

  it("serves the images from the service's own signed URL, without a bearer header", async () => {
    const { app, done } = await completedUrlTask();
    expect(done.body.data).toHaveLength(2);
    for (const item of done.body.data!) {
      expect(item).not.toHaveProperty("b64_json");
      expect(item.url!.startsWith(`${app.url}/`)).toBe(true);
      const response = await fetch(item.url!);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("image/png");
      const bytes = Buffer.from(await response.arrayBuffer());
      expect(bytes.subarray(0, 8)).toEqual(PNG_MAGIC);
    }
  });

  it("refuses a tampered signature, index, expiry or task id with a 404 envelope", async () => {
    const { app, done } = await completedUrlTask();
    const other = await submitOk(app, { prompt: "another", response_format: "url" });
    await waitForStatus(app, other, ["completed"]);
    const good = new URL(done.body.data![0]!.url!);
    const signature = good.searchParams.get("signature")!;
    const expires = good.searchParams.get("expires")!;

    const variants: Array<[string, (url: URL) => void]> = [
      [
        "signature",
        (url) =>
          url.searchParams.set(
            "signature",
            (signature[0] === "A" ? "B" : "A") + signature.slice(1),
          ),
      ],
      ["no signature", (url) => url.searchParams.delete("signature")],
      ["index", (url) => (url.pathname = url.pathname.replace(/\/0\.png$/, "/1.png"))],
      ["expires", (url) => url.searchParams.set("expires", String(Number(expires) + 1000))],
      ["task id", (url) => (url.pathname = url.pathname.replace(done.body.id, other))],
      ["extension", (url) => (url.pathname = url.pathname.replace(/\.png$/, ".jpeg"))],
    ];
    for (const [what, tamper] of variants) {
      const url = new URL(good);
      tamper(url);
      expect(url.href, what).not.toBe(good.href);
      const response = await fetch(url);
      const text = await response.text();
      expect(response.status, what).toBe(404);
      expect(response.headers.get("content-type"), what).toMatch(/^application\/json/);
      expect((JSON.parse(text) as { error: { code: string } }).error.code, what).toBe("not_found");
      expectNoLeak(text);
    }
    // The untouched URL still works, so the refusals above were about the tampering.
    expect((await fetch(good)).status).toBe(200);
  });
});

describe("what the channel answers", () => {
  it("passes on revised_prompt and usage, and fetches images a channel answers as URLs on its origin", async () => {
    const app = await useApp();
    const png = encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12) });
    const served = encodePng({ width: 3, height: 1, channels: 3, pixels: new Uint8Array(9) });
    app.upstream.serve("/files/generated.png", (_req, res) => {
      res.writeHead(200, { "content-type": "image/png" }).end(served);
    });
    app.upstream.behave("images", {
      kind: "status",
      status: 200,
      body: {
        created: 1,
        data: [
          { b64_json: png.toString("base64"), revised_prompt: "a better prompt" },
          { url: `${app.upstream.origin}/files/generated.png` },
        ],
        usage: { input_tokens: 3, output_tokens: 7, total_tokens: 10 },
      },
    });
    const id = await submitOk(app, { prompt: "mixed answer", n: 2 });
    const done = await waitForStatus(app, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.usage).toEqual({ input_tokens: 3, output_tokens: 7, total_tokens: 10 });
    expect(done.body.data).toEqual([
      { b64_json: png.toString("base64"), revised_prompt: "a better prompt" },
      { b64_json: served.toString("base64") },
    ]);
  });
});

describe("server.publicBaseUrl", () => {
  it("is the base of Location and of the signed image URLs", async () => {
    const app = await useApp({
      config: {
        server: { port: 0, host: "127.0.0.1", publicBaseUrl: "https://images.example.com/" },
      },
    });
    const submitted = await submit(app, { prompt: "behind a CDN", response_format: "url" });
    expect(submitted.headers.get("location")).toBe(
      `https://images.example.com/v1/images/tasks/${submitted.body.id}`,
    );
    const done = await waitForStatus(app, submitted.body.id, ["completed", "failed"]);
    const url = new URL(done.body.data![0]!.url!);
    expect(url.origin).toBe("https://images.example.com");
    // The CDN forwards the path and query as they are.
    const image = await fetch(`${app.url}${url.pathname}${url.search}`);
    expect(image.status).toBe(200);
    expect(image.headers.get("content-type")).toBe("image/png");
  });
});
