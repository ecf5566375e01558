import { TINY_PNG_B64 } from "../../support/fake-answers.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import { chaosBody, DEEP, pick, type Rng } from "./chaos-bodies.js";

/** A Responses call's answer: events to stream, or one JSON body. */
export type ResponsesAnswer =
  | { kind: "events"; events: unknown[]; what: string; valid: boolean }
  | { kind: "json"; body: unknown; what: string; valid: boolean };

const message = {
  type: "message",
  role: "assistant",
  content: [{ type: "output_text", text: "hi" }],
};
const image = (result: unknown) => ({
  id: "ig_1",
  type: "image_generation_call",
  status: "completed",
  result,
});
const usage = { input_tokens: 3, output_tokens: 5, total_tokens: 8 };

/** The final events a channel may end a response with, good and bad. */
function finalEvent(rng: Rng): [string, unknown, boolean] {
  const id = "resp_upstream";
  return pick<[string, unknown, boolean]>(rng, [
    [
      "completed",
      {
        type: "response.completed",
        response: { id, status: "completed", output: [message], usage },
      },
      true,
    ],
    [
      "completed with an image",
      {
        type: "response.completed",
        response: { id, status: "completed", output: [image(TINY_PNG_B64)], usage },
      },
      true,
    ],
    [
      "completed, image not base64",
      { type: "response.completed", response: { id, status: "completed", output: [image("%%%")] } },
      true,
    ],
    [
      "completed, usage nested deep",
      {
        type: "response.completed",
        response: { id, status: "completed", output: [], usage: DEEP },
      },
      false,
    ],
    ["completed, response not an object", { type: "response.completed", response: "done" }, false],
    [
      "failed, key echoed",
      {
        type: "response.failed",
        response: {
          id,
          status: "failed",
          error: { code: "server_error", message: `key ${UPSTREAM_KEY}` },
        },
      },
      true,
    ],
    [
      "incomplete",
      {
        type: "response.incomplete",
        response: { id, status: "incomplete", incomplete_details: { reason: "max_output_tokens" } },
      },
      true,
    ],
    ["an error event", { type: "error", code: "boom", message: `bad key ${UPSTREAM_KEY}` }, false],
    [
      "completed, output not a list",
      { type: "response.completed", response: { id, status: "completed", output: "hi" } },
      false,
    ],
    [
      "completed, output items odd",
      {
        type: "response.completed",
        response: { id, status: "completed", output: [null, 7, { type: 9 }] },
      },
      false,
    ],
    [
      "completed, its status in_progress",
      {
        type: "response.completed",
        response: { id: 42, status: "in_progress", output: [message] },
      },
      true,
    ],
  ]);
}

/** What a channel answers a held Responses call (`stream: true`): anything from a clean stream on. */
export function responsesAnswer(rng: Rng): ResponsesAnswer {
  if (rng() < 0.2) {
    const [what, body, valid] = finalEvent(rng);
    const object = (body as { response?: unknown }).response;
    return {
      kind: "json",
      body: typeof object === "object" ? object : body,
      what: `json: ${what}`,
      valid,
    };
  }
  const events: unknown[] = [
    { type: "response.created", response: { id: "resp_upstream", status: "in_progress" } },
  ];
  const count = Math.floor(rng() * 5);
  for (let i = 0; i < count; i++) {
    events.push(
      pick(rng, [
        {
          type: "response.output_text.delta",
          item_id: "msg_1",
          output_index: 0,
          content_index: 0,
          delta: "hi",
        },
        { type: "response.output_item.done", output_index: 0, item: message },
        {
          type: "response.image_generation_call.partial_image",
          partial_image_b64: TINY_PNG_B64,
          partial_image_index: 0,
          item_id: "ig_1",
          output_index: 0,
        },
        {
          type: "response.image_generation_call.partial_image",
          partial_image_b64: "%%%",
          partial_image_index: 1,
          item_id: "ig_1",
          output_index: 0,
        },
        { type: "response.output_item.done", output_index: 0, item: image(7) },
        chaosBody(rng, "event"),
      ]),
    );
  }
  // Most streams end with a final event; some never do (a stream that just stops).
  if (rng() < 0.8) {
    const [what, event, valid] = finalEvent(rng);
    events.push(event);
    // Now and then the channel goes on after its end: another end, more output.
    if (rng() < 0.2) {
      const [after, second] = finalEvent(rng);
      events.push({ type: "response.output_text.delta", delta: "late" }, second);
      return { kind: "events", events, what: `${what}, then ${after}`, valid };
    }
    return { kind: "events", events, what: `${count + 2} events, ${what}`, valid };
  }
  return { kind: "events", events, what: `${count + 1} events, no final one`, valid: false };
}

/**
 * A streamed background submission (an OpenAI background channel, partial images asked for):
 * the response named first, drafts good and bad, any number of them, and an end or none (the job
 * is then polled).
 */
export function backgroundEvents(rng: Rng, id: string): unknown[] {
  const events: unknown[] = [{ type: "response.created", response: { id, status: "queued" } }];
  const drafts = Math.floor(rng() * 6);
  for (let i = 0; i < drafts; i++) {
    events.push({
      type: "response.image_generation_call.partial_image",
      partial_image_index: pick(rng, [i, 0, -1, 1e9, "x"]),
      partial_image_b64: pick(rng, [TINY_PNG_B64, TINY_PNG_B64, "%%%", "", 7]),
    });
  }
  const end = pick(rng, [
    {
      type: "response.completed",
      response: { id, status: "completed", output: [image(TINY_PNG_B64)], usage },
    },
    { type: "response.completed", response: { id, status: "completed", output: [] } },
    {
      type: "response.failed",
      response: { id, status: "failed", error: { code: "x", message: `k ${UPSTREAM_KEY}` } },
    },
    { type: "response.completed", response: "done" },
    { type: "error", code: "stream_error", message: "the stream broke" },
    undefined,
  ]);
  if (end) events.push(end);
  return events;
}
