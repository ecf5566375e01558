import { afterEach, describe, expect, it } from "vitest";
import { startDemoChannel, type DemoChannel } from "../../src/demo/start-demo-channel.js";
import { slow } from "../support/time-factor.js";
import { inspectPng } from "./inspect-png.js";

// The demo channel's async image APIs on their own, as a client of each dialect calls them.

let demo: DemoChannel | undefined;
afterEach(async () => {
  await demo?.close();
  demo = undefined;
});

async function start(imageDelayMs: number): Promise<string> {
  demo = await startDemoChannel({ imageDelayMs });
  return demo.baseUrl;
}

async function call(
  url: string,
  method = "GET",
  body?: unknown,
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method,
    ...(body === undefined
      ? {}
      : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
  });
  return {
    status: res.status,
    headers: res.headers,
    json: (await res.json()) as Record<string, unknown>,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The job at `url` once its status is no longer one of `running`: polled, since a loaded machine
 * runs the demo's delay timer and draws its image late (a fixed wait of twice the delay failed).
 */
async function settled(url: string, running: string[]): ReturnType<typeof call> {
  const deadline = Date.now() + slow(10_000);
  for (;;) {
    const answer = await call(url);
    if (!running.includes(answer.json.status as string) || Date.now() > deadline) return answer;
    await sleep(50);
  }
}

describe("sub2api's async image API", () => {
  it("answers 202 with the job, processing until the delay passed, then the synchronous body", async () => {
    const base = await start(300);
    const submitted = await call(`${base}/images/generations/async`, "POST", {
      model: "gpt-image-1",
      prompt: "a lighthouse",
      size: "64x64",
    });
    expect(submitted.status).toBe(202);
    expect(submitted.json).toMatchObject({ object: "image.generation.task", status: "processing" });
    const id = submitted.json.task_id as string;
    expect(submitted.json.id).toBe(id);
    expect(submitted.headers.get("location")).toBe(`/v1/images/tasks/${id}`);
    expect(Number(submitted.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);

    expect((await call(`${base}/images/tasks/${id}`)).json.status).toBe("processing");
    const done = await settled(`${base}/images/tasks/${id}`, ["processing"]);
    expect(done.json).toMatchObject({ status: "completed", http_status: 200 });
    const result = done.json.result as { data: Array<{ b64_json: string }>; usage: unknown };
    expect(inspectPng(Buffer.from(result.data[0]!.b64_json, "base64"))).toMatchObject({
      width: 64,
      height: 64,
    });
    expect(result.usage).toBeDefined();
  });

  it("fails a '!fail' prompt as the synchronous route would, and refuses stream: true", async () => {
    const base = await start(50);
    const { json } = await call(`${base}/images/generations/async`, "POST", {
      prompt: "!fail now",
    });
    const failed = await settled(`${base}/images/tasks/${json.id as string}`, ["processing"]);
    expect(failed.json).toMatchObject({
      status: "failed",
      http_status: 400,
      error: { code: "content_policy_violation" },
    });
    const streamed = await call(`${base}/images/generations/async`, "POST", {
      prompt: "x",
      stream: true,
    });
    expect(streamed.status).toBe(400);
    expect(streamed.json).toMatchObject({ error: { param: "stream", code: "invalid_value" } });
    expect((await call(`${base}/images/tasks/nope`)).status).toBe(404);
  });
});

describe("Bifrost's async image API", () => {
  it("answers 202 pending, 202 while processing, then 200 with the result", async () => {
    const base = await start(300);
    const submitted = await call(`${base}/async/images/generations`, "POST", {
      prompt: "a harbour",
      n: 2,
      size: "32x32",
    });
    expect(submitted.status).toBe(202);
    expect(submitted.json.status).toBe("pending");
    const id = submitted.json.id as string;
    const running = await call(`${base}/async/images/generations/${id}`);
    expect(running.status).toBe(202);
    expect(running.json.status).toBe("processing");
    const done = await settled(`${base}/async/images/generations/${id}`, ["pending", "processing"]);
    expect(done.status).toBe(200);
    expect(done.json.status).toBe("completed");
    expect((done.json.result as { data: unknown[] }).data).toHaveLength(2);
  });
});

describe("background Responses with the image_generation tool", () => {
  const body = {
    model: "gpt-4.1-mini",
    input: "a windmill",
    background: true,
    tools: [{ type: "image_generation", model: "gpt-image-1", size: "48x48" }],
  };

  it("answers queued, in_progress, then completed with an image_generation_call", async () => {
    const base = await start(300);
    const created = await call(`${base}/responses`, "POST", body);
    expect(created.status).toBe(200);
    expect(created.json).toMatchObject({ object: "response", status: "queued", background: true });
    const id = created.json.id as string;
    expect(id).toMatch(/^resp_/);
    expect((await call(`${base}/responses/${id}`)).json.status).toBe("in_progress");
    const done = await settled(`${base}/responses/${id}`, ["queued", "in_progress"]);
    expect(done.json.status).toBe("completed");
    const [item] = done.json.output as Array<Record<string, unknown>>;
    expect(item).toMatchObject({ type: "image_generation_call", status: "completed" });
    expect(inspectPng(Buffer.from(item!.result as string, "base64"))).toMatchObject({ width: 48 });
    expect(done.json.usage).toMatchObject({ total_tokens: expect.any(Number) });
  });

  it("cancels a running one; other responses keep their own routes", async () => {
    const base = await start(5_000);
    const created = await call(`${base}/responses`, "POST", body);
    const id = created.json.id as string;
    const cancelled = await call(`${base}/responses/${id}/cancel`, "POST");
    expect(cancelled.json.status).toBe("cancelled");
    expect((await call(`${base}/responses/${id}`)).json.status).toBe("cancelled");
    const text = await call(`${base}/responses`, "POST", { model: "m", input: "hello" });
    expect(text.json.status).toBe("completed");
    expect((await call(`${base}/responses/${text.json.id as string}`)).json.status).toBe(
      "completed",
    );
  });

  it("streams its events with partial images when asked (stream: true)", async () => {
    const base = await start(400);
    const res = await fetch(`${base}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        ...body,
        stream: true,
        tools: [{ ...body.tools[0], partial_images: 2 }],
      }),
    });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = (await res.text())
      .split("\n\n")
      .filter((block) => block.includes("data: "))
      .map(
        (block) => JSON.parse(block.slice(block.indexOf("data: ") + 6)) as Record<string, unknown>,
      );
    const types = events.map((event) => event.type);
    expect(types[0]).toBe("response.created");
    expect(
      types.filter((type) => type === "response.image_generation_call.partial_image"),
    ).toHaveLength(2);
    expect(types.at(-1)).toBe("response.completed");
    const partial = events.find((e) => e.type === "response.image_generation_call.partial_image")!;
    expect(inspectPng(Buffer.from(partial.partial_image_b64 as string, "base64"))).toMatchObject({
      width: 48,
    });
    const final = events.at(-1)!.response as { id: string; status: string };
    expect(final.status).toBe("completed");
    // The same response, polled.
    expect((await call(`${base}/responses/${final.id}`)).json.status).toBe("completed");
  });

  it("finishes a job it made before a restart (an id in its form) from the id alone", async () => {
    let base = await start(200);
    const { json } = await call(`${base}/responses`, "POST", body);
    const id = json.id as string;
    await demo!.close();
    base = await start(200);
    expect((await call(`${base}/responses/${id}`)).json.status).toBe("in_progress");
    const done = await settled(`${base}/responses/${id}`, ["queued", "in_progress"]);
    expect(done.json.status).toBe("completed");
    const [item] = done.json.output as Array<Record<string, unknown>>;
    expect(inspectPng(Buffer.from(item!.result as string, "base64"))).toMatchObject({ width: 48 });
    expect((await call(`${base}/responses/resp_unknown`)).status).toBe(404);
  });
});
