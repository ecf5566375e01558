import type { IncomingMessage, ServerResponse } from "node:http";
import { describe, expect, it, onTestFinished } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import { retrieveUntil, sdk } from "../../responses/response-helpers.js";
import { submit, useApp, type ApiResponse } from "../task-api.js";

/*
 * A channel (or a proxy or CDN before it) that holds its answer open after the answer's end: the
 * task goes on at that end. (An image downloaded from a URL: the download is closed at the
 * image's end, `upstream-image-answers.test.ts`.) What follows is still read for a second (so the
 * connection can be reused) but in the background: the task does not wait for it, nor for the
 * channel's timeout. An event stream's end is its `data: [DONE]` when it sends one.
 */

const PNG = encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12) });

async function appWithChannel() {
  const upstream = await startFakeUpstream();
  onTestFinished(() => upstream.close());
  const app = await useApp({
    upstream,
    config: {
      channels: [
        {
          name: "fake",
          baseUrl: upstream.baseUrl,
          apiKey: UPSTREAM_KEY,
          models: ["gpt-image-1", "gpt-4o-mini"],
        },
      ],
    },
  });
  return { app, upstream };
}

/** A response the channel never ends: its socket, to tell whether the service dropped it. */
function holdOpen(res: ServerResponse, status: number, type: string, body: Buffer | string) {
  res.writeHead(status, { "content-type": type });
  res.write(body);
  return res.socket;
}

/**
 * Submits a task (`extra`: more of its fields) and waits for its end in the same call (`Prefer:
 * wait`), far below the test app's task timeout (600 s).
 */
async function submitAndWait(
  app: Parameters<typeof submit>[0],
  extra: Record<string, unknown> = {},
): Promise<ApiResponse> {
  const body = { prompt: "held", response_format: "b64_json", ...extra };
  const done = await submit(app, body, { headers: { prefer: "wait=20" } });
  expect(done.status, done.text).toBe(200);
  return done;
}

/**
 * A tenth of the second a held answer's rest is still read: had the service dropped that
 * connection before going on, the channel has seen it closed by then.
 */
const settled = () => new Promise((resolve) => setTimeout(resolve, 100));

function answerWith(upstream: FakeUpstream, respond: (res: ServerResponse) => void) {
  upstream.behave("images", {
    kind: "custom",
    respond: (_req: IncomingMessage, res: ServerResponse) => respond(res),
  });
}

describe("an image task's answer held open after its end", () => {
  it("completes with the JSON's image while the answer is still open", async () => {
    const { app, upstream } = await appWithChannel();
    let held: ServerResponse["socket"] | undefined;
    const json = JSON.stringify({ created: 1, data: [{ b64_json: PNG.toString("base64") }] });
    answerWith(upstream, (res) => (held = holdOpen(res, 200, "application/json", json)));
    const done = await submitAndWait(app);
    await settled();
    expect(held?.destroyed).toBe(false);
    expect(done.body.status).toBe("completed");
    expect(Buffer.from(done.body.data![0]!.b64_json!, "base64")).toEqual(PNG);
    // Dropped a second later: the connection is closed.
    await expect.poll(() => held?.destroyed, { timeout: 5_000 }).toBe(true);
  });

  it("fails with the channel's error while the error is still open", async () => {
    const { app, upstream } = await appWithChannel();
    let held: ServerResponse["socket"] | undefined;
    const error = '{"error":{"code":"content_policy_violation","message":"Refused."}}';
    answerWith(upstream, (res) => (held = holdOpen(res, 400, "application/json", error)));
    const done = await submitAndWait(app);
    await settled();
    expect(held?.destroyed).toBe(false);
    expect(done.body.status).toBe("failed");
    expect(done.body.error).toMatchObject({ code: "content_policy_violation" });
  });
});

describe("an event stream ended by data: [DONE] and held open", () => {
  const event = (json: Record<string, unknown>) =>
    `event: ${String(json.type)}\ndata: ${JSON.stringify(json)}\n\n`;
  const completed = event({ type: "image_generation.completed", b64_json: PNG.toString("base64") });
  const DONE = "data: [DONE]\n\n";

  it("completes an image task with the images made, fewer than asked, at the [DONE]", async () => {
    const { app, upstream } = await appWithChannel();
    let held: ServerResponse["socket"] | undefined;
    answerWith(
      upstream,
      (res) => (held = holdOpen(res, 200, "text/event-stream", completed + DONE)),
    );
    const done = await submitAndWait(app, { n: 2, partial_images: 1 });
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.data).toHaveLength(1);
    expect(Buffer.from(done.body.data![0]!.b64_json!, "base64")).toEqual(PNG);
    await expect.poll(() => held?.destroyed, { timeout: 5_000 }).toBe(true);
  });

  it("fails an image task invalid_response at a [DONE] before any image", async () => {
    const { app, upstream } = await appWithChannel();
    const partial = event({ type: "image_generation.partial_image", b64_json: "" });
    answerWith(upstream, (res) => holdOpen(res, 200, "text/event-stream", partial + DONE));
    const done = await submitAndWait(app, { partial_images: 1 });
    expect(done.body.status, done.text).toBe("failed");
    expect(done.body.error).toMatchObject({ code: "invalid_response" });
    expect(done.body.error?.message).toMatch(/ended before the image was completed/);
  });

  it("fails a background response invalid_response at a [DONE] before its end", async () => {
    const { app, upstream } = await appWithChannel();
    const created = { id: "resp_up", status: "in_progress", output: [] };
    const start = event({ type: "response.created", response: created });
    upstream.behave("responses", {
      kind: "custom",
      respond: (_req: IncomingMessage, res: ServerResponse) =>
        void holdOpen(res, 200, "text/event-stream", start + DONE),
    });
    const client = sdk(app);
    const { id } = await client.responses.create({
      model: "gpt-4o-mini",
      input: "held",
      background: true,
    });
    const done = await retrieveUntil(client, id, ["completed", "failed"], 10_000);
    expect(done.status).toBe("failed");
    expect(done.error?.message).toBe(
      "The upstream channel's stream ended before the response did.",
    );
  });
});
