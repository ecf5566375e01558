import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import { encodePng } from "../../src/demo/png-encoder.js";
import { errorEnvelope, sendJson } from "../support/fake-http.js";
import type { FakeUpstream, RouteHandler } from "../support/fake-upstream.js";

type Json = Record<string, unknown>;

/** A picture of `side` pixels of noise: its PNG weighs what a real image's does. */
export function testPng(side: number): Buffer {
  const pixels = new Uint8Array(randomBytes(side * side * 3));
  return encodePng({ width: side, height: side, channels: 3, pixels });
}

/** How the scripted channel answers `POST /v1/responses`. */
export interface ScriptOptions {
  /** The reply's words. */
  words?: string[];
  /** An `image_generation_call` output with this PNG, and `partials` partial images before it. */
  image?: { png: Buffer; partials: number };
  /** The stream stops after its first text delta until {@link ScriptedChannel.release}. */
  hold?: boolean;
  /** Pause between events, in ms. */
  pauseMs?: number;
  /** Usage the final response reports. */
  usage?: { input_tokens: number; output_tokens: number };
  /** The response ends `incomplete` (`max_output_tokens`), as a capped one does. */
  incomplete?: boolean;
}

/** A channel that runs Responses calls, plain and streamed, and knows nothing of background mode. */
export interface ScriptedChannel {
  /** Lets held streams go on. */
  release(): void;
  /** Streams that ended before their last event because the caller went away. */
  readonly aborted: number;
  /** Calls answered (created a response). */
  readonly calls: number;
  /** The ids of the responses it made, in order. */
  readonly ids: string[];
  /** Resolves when the next call has sent its first events. */
  nextStarted(): Promise<void>;
}

/**
 * Installs on `upstream` a Responses channel of a gateway that does not
 * implement background mode (`background: true` is refused, as such gateways
 * do, and a retrieve of its ids is 404): plain calls answer the finished
 * response, streamed ones its events, with an image tool's output when asked.
 */
export function scriptChannel(
  upstream: FakeUpstream,
  options: ScriptOptions = {},
): ScriptedChannel {
  let held = options.hold === true;
  let waiting: Array<() => void> = [];
  const startedWaiters: Array<() => void> = [];
  const state = { aborted: 0, calls: 0 };
  const ids: string[] = [];
  const hold = (res: ServerResponse) =>
    new Promise<boolean>((resolve) => {
      if (!held) return resolve(true);
      const onClose = () => resolve(false);
      res.once("close", onClose);
      waiting.push(() => {
        res.off("close", onClose);
        resolve(!res.destroyed);
      });
    });
  const respond: RouteHandler = async (_req, res, body) => {
    const request = (body ?? {}) as Json;
    if (request.background === true) {
      sendJson(
        res,
        400,
        errorEnvelope(
          "Background mode is not supported.",
          "invalid_request_error",
          "unsupported_parameter",
        ),
      );
      return;
    }
    state.calls += 1;
    const answer = new ScriptedAnswer(request, options);
    ids.push(answer.id);
    if (request.stream !== true) {
      sendJson(res, 200, answer.final());
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    let finished = false;
    res.once("close", () => {
      if (!finished) state.aborted += 1;
    });
    const events = answer.events();
    let first = true;
    for (const event of events) {
      if (res.destroyed) return;
      res.write(`event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`);
      if (event.type === "response.output_text.delta" && first) {
        first = false;
        for (const resolve of startedWaiters.splice(0)) resolve();
        if (!(await hold(res))) return;
      }
      if (options.pauseMs) await new Promise((resolve) => setTimeout(resolve, options.pauseMs));
    }
    finished = true;
    res.end();
  };
  upstream.behave("responses", { kind: "custom", respond });
  return {
    release() {
      held = false;
      for (const resolve of waiting.splice(0)) resolve();
      waiting = [];
    },
    get aborted() {
      return state.aborted;
    },
    get calls() {
      return state.calls;
    },
    ids,
    nextStarted: () => new Promise<void>((resolve) => startedWaiters.push(resolve)),
  };
}

/** One response of the scripted channel: its events and its final object. */
class ScriptedAnswer {
  readonly id = `resp_${randomBytes(24).toString("hex")}`;
  readonly messageId = `msg_${randomBytes(8).toString("hex")}`;
  readonly imageId = `ig_${randomBytes(8).toString("hex")}`;
  readonly words: string[];

  constructor(
    private readonly request: Json,
    private readonly options: ScriptOptions,
  ) {
    this.words = options.words ?? ["Hello ", "from ", "the ", "scripted ", "channel!"];
  }

  private message(status: string, text: string): Json {
    return {
      id: this.messageId,
      type: "message",
      status,
      role: "assistant",
      content: status === "completed" ? [{ type: "output_text", text, annotations: [] }] : [],
    };
  }

  private imageItem(status: string): Json {
    const png = this.options.image?.png;
    return {
      id: this.imageId,
      type: "image_generation_call",
      status,
      output_format: "png",
      result: status === "completed" && png ? png.toString("base64") : null,
    };
  }

  private output(): Json[] {
    const text = this.words.join("");
    return [
      ...(this.options.image ? [this.imageItem("completed")] : []),
      this.message("completed", text),
    ];
  }

  /** The Response object at `status`. */
  object(status: string, output: Json[]): Json {
    return {
      id: this.id,
      object: "response",
      created_at: Math.floor(Date.now() / 1000),
      status,
      background: false,
      error: null,
      incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
      instructions: this.request.instructions ?? null,
      model: this.request.model,
      output,
      parallel_tool_calls: true,
      previous_response_id: this.request.previous_response_id ?? null,
      store: this.request.store !== false,
      temperature: 1,
      text: { format: { type: "text" } },
      tool_choice: "auto",
      tools: this.request.tools ?? [],
      top_p: 1,
      truncation: "disabled",
      usage:
        status === "completed" || status === "incomplete"
          ? {
              input_tokens: this.options.usage?.input_tokens ?? 11,
              input_tokens_details: { cached_tokens: 0 },
              output_tokens: this.options.usage?.output_tokens ?? this.words.length,
              output_tokens_details: { reasoning_tokens: 0 },
              total_tokens:
                (this.options.usage?.input_tokens ?? 11) +
                (this.options.usage?.output_tokens ?? this.words.length),
            }
          : null,
      user: null,
      metadata: {},
    };
  }

  final(): Json {
    return this.object(this.options.incomplete ? "incomplete" : "completed", this.output());
  }

  /** The stream's events, in OpenAI's order, numbered from 0. */
  events(): Json[] {
    const events: Json[] = [];
    const add = (type: string, fields: Json) =>
      events.push({ type, sequence_number: events.length, ...fields });
    add("response.created", { response: this.object("in_progress", []) });
    add("response.in_progress", { response: this.object("in_progress", []) });
    let outputIndex = 0;
    const { image } = this.options;
    if (image) {
      const at = { output_index: 0, item_id: this.imageId };
      add("response.output_item.added", { output_index: 0, item: this.imageItem("in_progress") });
      add("response.image_generation_call.in_progress", at);
      add("response.image_generation_call.generating", at);
      for (let index = 0; index < image.partials; index += 1) {
        add("response.image_generation_call.partial_image", {
          ...at,
          partial_image_index: index,
          partial_image_b64: testPng(16 + index).toString("base64"),
        });
      }
      add("response.image_generation_call.completed", at);
      add("response.output_item.done", { output_index: 0, item: this.imageItem("completed") });
      outputIndex = 1;
    }
    const at = { item_id: this.messageId, output_index: outputIndex, content_index: 0 };
    add("response.output_item.added", {
      output_index: outputIndex,
      item: this.message("in_progress", ""),
    });
    add("response.content_part.added", {
      ...at,
      part: { type: "output_text", text: "", annotations: [] },
    });
    for (const word of this.words) {
      add("response.output_text.delta", { ...at, delta: word, logprobs: [] });
    }
    const text = this.words.join("");
    add("response.output_text.done", { ...at, text, logprobs: [] });
    add("response.content_part.done", {
      ...at,
      part: { type: "output_text", text, annotations: [] },
    });
    add("response.output_item.done", {
      output_index: outputIndex,
      item: this.message("completed", text),
    });
    add(this.options.incomplete ? "response.incomplete" : "response.completed", {
      response: this.final(),
    });
    return events;
  }
}
