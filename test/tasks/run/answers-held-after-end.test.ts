import type { IncomingMessage, ServerResponse } from "node:http";
import { describe, expect, it, onTestFinished } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import { submit, useApp, type ApiResponse } from "../task-api.js";

/*
 * A channel (or a proxy or CDN before it) that holds its answer open after the answer's end: the
 * task goes on at that end. (An image downloaded from a URL: its own agent is closed at the
 * image's end, `upstream-image-answers.test.ts`.) What follows is still read for a second (so the connection can be
 * reused) but in the background: the task does not wait for it, nor for the channel's timeout.
 */

const PNG = encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12) });

async function appWithChannel() {
  const upstream = await startFakeUpstream();
  onTestFinished(() => upstream.close());
  const app = await useApp({
    upstream,
    config: {
      channels: [
        { name: "fake", baseUrl: upstream.baseUrl, apiKey: UPSTREAM_KEY, models: ["gpt-image-1"] },
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

/** Submits a task and waits for its end in the same call (`Prefer: wait`). */
async function submitAndWait(app: Parameters<typeof submit>[0]): Promise<ApiResponse> {
  const body = { prompt: "held", response_format: "b64_json" };
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
