import OpenAI, { APIError, toFile } from "openai";
import { expect } from "vitest";
import type { FakeRoute } from "../support/fake-upstream.js";
import type { TestApp } from "../support/start-test-app.js";
import { call, waitForStatus } from "../tasks/task-api.js";

/** What a client got from one call, reduced to what the failover table compares. */
export type Seen =
  /** A whole answer; `from` names the channel when the answer says it. */
  | { ok: true; from?: string }
  /** An error envelope (ours, or the channel's passed on). */
  | { status: number; code: string | null }
  /** A 200 stream that broke off: the client sees it cut, never complete. */
  | { cut: true };

/** One way a client calls through the service: a route shape of the failover table. */
export interface CallShape {
  name: string;
  /** The fake channel's route this shape reaches (with `big`: `bigRoute`, if set). */
  route: FakeRoute;
  bigRoute?: FakeRoute;
  /**
   * Makes the call and reports what the client got. `big`: a body larger than
   * the sockets' buffers, so a channel that resets on the request's head
   * does so while the body is still being written.
   */
  run(app: TestApp, big: boolean): Promise<Seen>;
}

const MiB = 1024 * 1024;
/** Larger than every socket buffer on the way (loopback autotunes to a few MiB). */
const BIG_BYTES = 16 * MiB;

const sdk = (app: TestApp) =>
  new OpenAI({ baseURL: app.baseURL, apiKey: app.key, maxRetries: 0, timeout: 20_000 });

/** An SDK call's outcome, an APIError as the envelope it carried. */
async function viaSdk(run: () => Promise<Seen>): Promise<Seen> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof APIError && err.status !== undefined) {
      return { status: err.status, code: (err.code as string | null | undefined) ?? null };
    }
    throw err;
  }
}

const messages = (big: boolean) => [
  { role: "user" as const, content: big ? "x".repeat(BIG_BYTES) : "hi" },
];
/** The fake's answers say which channel made them: `Hello from <name>!`. */
const from = (text: string | null | undefined) => /^Hello from (\w+)!$/.exec(text ?? "")?.[1];

export const JSON_ROUTE: CallShape = {
  name: "a JSON route (chat)",
  route: "chat",
  run: (app, big) =>
    viaSdk(async () => {
      const answer = await sdk(app).chat.completions.create({
        model: "gpt-4o-mini",
        messages: messages(big),
      });
      return { ok: true, from: from(answer.choices[0]?.message.content) };
    }),
};

export const STREAM: CallShape = {
  name: "a stream (chat, stream: true)",
  route: "chat",
  run: (app, big) =>
    viaSdk(async () => {
      const stream = await sdk(app).chat.completions.create({
        model: "gpt-4o-mini",
        messages: messages(big),
        stream: true,
      });
      let text = "";
      try {
        for await (const chunk of stream) text += chunk.choices?.[0]?.delta?.content ?? "";
      } catch {
        return { cut: true };
      }
      return { ok: true, from: from(text) };
    }),
};

/** A form whose `model` comes first: the rest streams from the client to the channel. */
export const FORM: CallShape = {
  name: "a multipart form (images.edit, streamed)",
  route: "edits",
  run: (app, big) =>
    viaSdk(async () => {
      await sdk(app).images.edit({
        model: "gpt-image-1",
        prompt: "a hat",
        image: await toFile(Buffer.alloc(big ? BIG_BYTES : 64 * 1024, 7), "in.png", {
          type: "image/png",
        }),
      });
      return { ok: true };
    }),
};

/** A form whose `model` comes last: received whole (spooled) before a channel is called. */
export const SPOOLED_FORM: CallShape = {
  name: "a multipart form received whole (model last)",
  route: "edits",
  async run(app, big) {
    const form = new FormData();
    form.set("prompt", "a hat");
    form.set("image", new Blob([Buffer.alloc(big ? BIG_BYTES : 64 * 1024, 7)]), "in.png");
    form.set("model", "gpt-image-1");
    const response = await fetch(`${app.baseURL}/images/edits`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}` },
      body: form,
    });
    const body = (await response.json()) as { error?: { code: string | null } };
    return response.ok ? { ok: true } : { status: response.status, code: body.error?.code ?? null };
  },
};

/**
 * An image task: a generation, or with `big` an edit whose input image is
 * larger than the sockets' buffers. What the client sees is the task's end.
 */
export const IMAGE_TASK: CallShape = {
  name: "an image task",
  route: "images",
  bigRoute: "edits",
  async run(app, big) {
    let id: string;
    if (big) {
      const form = new FormData();
      form.set("model", "gpt-image-1");
      form.set("prompt", "a big hat");
      form.set("image", new Blob([pngOf(BIG_BYTES)], { type: "image/png" }), "in.png");
      const response = await fetch(`${app.baseURL}/images/edits/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${app.key}` },
        body: form,
      });
      expect(response.status, await response.clone().text()).toBe(202);
      id = ((await response.json()) as { id: string }).id;
    } else {
      const response = await call(app, "POST", "/v1/images/tasks", {
        json: { model: "gpt-image-1", prompt: "a hat" },
      });
      expect(response.status, response.text).toBe(202);
      id = response.body.id;
    }
    const done = await waitForStatus(app, id, ["completed", "failed"], 20_000);
    if (done.body.status === "completed") return { ok: true };
    // A failed task: its error code stands for the status the client would have had.
    return { status: 0, code: done.body.error?.code ?? null };
  },
};

/** `bytes` of a PNG as far as its signature goes (edits check the type, not the pixels). */
function pngOf(bytes: number): Buffer {
  const png = Buffer.alloc(bytes, 7);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(png);
  return png;
}
