import type { IncomingMessage, ServerResponse } from "node:http";
import { encodePng } from "../../src/demo/png-encoder.js";
import type { FakeRoute, FakeUpstream } from "../support/fake-upstream.js";

/** A PNG of one flat colour, `shade` 0 to 255: each partial image of a test differs. */
export function flatPng(shade: number, side = 8): Buffer {
  return encodePng({
    width: side,
    height: side,
    channels: 3,
    pixels: new Uint8Array(side * side * 3).fill(shade),
  });
}

/** The usage a scripted `.completed` event carries. */
export const STREAM_USAGE = {
  input_tokens: 9,
  input_tokens_details: { text_tokens: 9, image_tokens: 0 },
  output_tokens: 100,
  total_tokens: 109,
};

/** One request the scripted channel is answering. */
export interface ScriptedRequest {
  /** The body as the fake read it (JSON, or a form's fields). */
  body: Record<string, unknown>;
  /** Sends a partial image (`partial_image_index` `index`, a flat PNG of `shade`). */
  partial(index: number, shade?: number): void;
  /** Sends the `.completed` event with the final image and {@link STREAM_USAGE}, and ends. */
  complete(shade?: number): void;
  /** Sends a `.completed` event as {@link complete} does, the stream left open (one of `n`). */
  image(shade?: number): void;
  /** Sends a `.completed` event whose image is none (a GIF), with its usage, the stream left open. */
  notAnImage(): void;
  /** Sends an `error` event with `code`, and ends. */
  fail(code: string): void;
  /** Destroys the connection mid-stream, as a channel that crashes does. */
  breakOff(): void;
  /** Answers plain JSON (as a channel that does not stream), at once. */
  answerJson(shade?: number): void;
  /** Resolves when the service went away (it aborted the call). */
  gone: Promise<void>;
}

/**
 * A channel whose image route answers `stream: true` step by step, as the
 * test says: each request waits in {@link next} until the test sends its
 * events, so partial images arrive at controlled times.
 */
export function scriptImageStream(upstream: FakeUpstream, route: FakeRoute = "images") {
  const waiting: Array<(request: ScriptedRequest) => void> = [];
  const arrived: ScriptedRequest[] = [];
  const kind = route === "edits" ? "image_edit" : "image_generation";
  upstream.behave(route, {
    kind: "custom",
    respond(_req: IncomingMessage, res: ServerResponse, body: unknown) {
      let started = false;
      const start = () => {
        if (started) return;
        started = true;
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      };
      const send = (type: string, fields: Record<string, unknown>) => {
        start();
        res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`);
      };
      const request: ScriptedRequest = {
        body: (body ?? {}) as Record<string, unknown>,
        partial(index, shade = 40 * (index + 1)) {
          send(`${kind}.partial_image`, {
            b64_json: flatPng(shade).toString("base64"),
            partial_image_index: index,
            created_at: 1,
            size: "8x8",
            output_format: "png",
          });
        },
        complete(shade = 250) {
          request.image(shade);
          res.end();
        },
        image(shade = 250) {
          send(`${kind}.completed`, {
            b64_json: flatPng(shade).toString("base64"),
            created_at: 1,
            size: "8x8",
            output_format: "png",
            usage: STREAM_USAGE,
          });
        },
        notAnImage() {
          send(`${kind}.completed`, {
            b64_json: Buffer.from("GIF89a not one of ours").toString("base64"),
            usage: STREAM_USAGE,
          });
        },
        fail(code) {
          send("error", { error: { code, message: `The channel failed: ${code}.` } });
          res.end();
        },
        breakOff() {
          start();
          res.socket?.destroy();
        },
        answerJson(shade = 250) {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(
            JSON.stringify({
              created: 1,
              data: [{ b64_json: flatPng(shade).toString("base64") }],
              usage: STREAM_USAGE,
            }),
          );
        },
        gone: new Promise((resolve) => res.once("close", () => resolve())),
      };
      arrived.push(request);
      const taker = waiting.shift();
      taker?.(request);
      // Held open until the test has sent its events.
      return new Promise<void>((resolve) => res.once("close", () => resolve()));
    },
  });
  let taken = 0;
  return {
    /** The next request the channel gets (in order of arrival). */
    next(): Promise<ScriptedRequest> {
      const index = taken++;
      const request = arrived[index];
      if (request) return Promise.resolve(request);
      return new Promise((resolve) => waiting.push(resolve));
    },
  };
}
