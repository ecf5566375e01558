import { setImmediate as nextTurn, setTimeout as sleep } from "node:timers/promises";
import { demoId, messageText } from "./demo-chat-reply.js";
import { coarse } from "./demo-image-stream.js";
import { DemoRequestError, invalidParam, isJsonObject, wholeNumber } from "./demo-http-helpers.js";
import { drawDemoImage, parseDemoImageSize, type ImageSize } from "./draw-demo-image.js";
import { encodePng, type RawImage } from "./png-encoder.js";

type Json = Record<string, unknown>;

/** The `image_generation` tool of a Responses call, as the demo draws it. */
export interface DemoImageTool {
  /** Partial images streamed before the final one (`partial_images`, 0 to 3). */
  partials: number;
  size: ImageSize;
  quality: string;
  background: string;
}

/**
 * The request's `image_generation` tool, unless it offers none (or
 * `tool_choice: "none"`): the demo then always calls it, as a model asked for
 * a picture would.
 * @throws DemoRequestError for a tool whose `size` or `partial_images` OpenAI would refuse
 */
export function imageToolOf(body: Json): DemoImageTool | undefined {
  if (body.tool_choice === "none" || !Array.isArray(body.tools)) return undefined;
  const tool = body.tools.find(
    (candidate): candidate is Json =>
      isJsonObject(candidate) && candidate.type === "image_generation",
  );
  if (!tool) return undefined;
  const size = parseDemoImageSize(tool.size);
  if (!size) {
    throw new DemoRequestError(
      400,
      invalidParam("tools[].size", "'size' must be auto or WIDTHxHEIGHT."),
    );
  }
  return {
    partials: wholeNumber(tool.partial_images, "tools[].partial_images", 0, 3, 0),
    size,
    quality: typeof tool.quality === "string" ? tool.quality : "auto",
    background: typeof tool.background === "string" ? tool.background : "opaque",
  };
}

/** What a call's stream writes: one event (type and fields; the stream numbers it). */
export type SendEvent = (type: string, fields: Json) => void;

/**
 * One call of the image tool: a picture drawn from the last user message (as
 * the demo's image routes draw from a prompt), its item as OpenAI shapes an
 * `image_generation_call` (the PNG's base64 in `result`), and its events when
 * streamed, with coarse drafts of it as partial images. Drawing takes the
 * channel's image delay, spread over its events.
 */
export class DemoImageCall {
  readonly id = demoId("ig_");
  private picture: RawImage | undefined;
  private png: string | undefined;

  constructor(
    readonly tool: DemoImageTool,
    /** The picture's prompt. */
    readonly prompt: string,
  ) {}

  /** The call's prompt: the text of the request's last user message. */
  static promptOf(items: readonly Json[]): string {
    for (let i = items.length - 1; i >= 0; i -= 1) {
      const item = items[i] as Json;
      if (item.role === "user") return messageText(item.content) || "a picture";
    }
    return "a picture";
  }

  /** The PNG's base64. */
  result(): string {
    this.png ??= encodePng(this.draw()).toString("base64");
    return this.png;
  }

  /** The `image_generation_call` item, with its result once `done`. */
  item(status: "in_progress" | "generating" | "completed", done: boolean): Json {
    const { size, quality, background } = this.tool;
    return {
      id: this.id,
      type: "image_generation_call",
      status,
      background,
      output_format: "png",
      quality,
      size: `${size.width}x${size.height}`,
      revised_prompt: this.prompt,
      result: done ? this.result() : null,
    };
  }

  /** A finished Response object with the call's item first in its output. */
  withOutput(snapshot: Json): Json {
    const output = Array.isArray(snapshot.output) ? snapshot.output : [];
    return { ...snapshot, output: [this.item("completed", true), ...output] };
  }

  /**
   * The call's events as output item 0: added, in progress, generating, each
   * partial image (a coarser draft first), completed, done; false when the
   * client left meanwhile.
   */
  async stream(send: SendEvent, delayMs: number, gone: AbortSignal): Promise<boolean> {
    const at = { output_index: 0, item_id: this.id };
    const { partials } = this.tool;
    send("response.output_item.added", { output_index: 0, item: this.item("in_progress", false) });
    send("response.image_generation_call.in_progress", at);
    send("response.image_generation_call.generating", at);
    const pauseMs = delayMs / (partials + 1);
    for (let index = 0; index < partials; index += 1) {
      if (!(await pauseFor(pauseMs, gone))) return false;
      const draft = coarse(this.draw(), 2 ** (3 + partials - index));
      send("response.image_generation_call.partial_image", {
        ...at,
        partial_image_index: index,
        partial_image_b64: encodePng(draft).toString("base64"),
        size: `${this.tool.size.width}x${this.tool.size.height}`,
        output_format: "png",
      });
    }
    if (!(await pauseFor(pauseMs, gone))) return false;
    send("response.image_generation_call.completed", at);
    send("response.output_item.done", { output_index: 0, item: this.item("completed", true) });
    return true;
  }

  private draw(): RawImage {
    this.picture ??= drawDemoImage(this.prompt, this.tool.size);
    return this.picture;
  }
}

/** Sleeps `ms`, then lets other requests in; false when the client went away meanwhile. */
export async function pauseFor(ms: number, gone: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal: gone });
    await nextTurn();
    return !gone.aborted;
  } catch {
    return false;
  }
}
