import type { GeneratedImage } from "../core/generated-image.js";
import { TaskFailure } from "../core/task-failure.js";
import type { TaskRecord } from "../core/task-record.js";
import {
  base64Image,
  checkedImage,
  decodeEach,
  invalidResponse,
  scrubDeep,
  type GenerationSource,
} from "./decode-generation.js";
import type { EditFile } from "./generate-images.js";
import { isObject } from "./json-object-of.js";
import { jobFailure, segment, text, type JobDialect, type JobState } from "./job-dialect.js";

/** The task's image parameters the `image_generation` tool takes, as the image routes name them. */
const TOOL_FIELDS = [
  "size",
  "quality",
  "background",
  "output_format",
  "output_compression",
  "moderation",
  "input_fidelity",
] as const;

/**
 * OpenAI's background mode, as a client: a Responses call with
 * `background: true` whose `image_generation` tool carries the task's image
 * model and parameters (the Responses model is `channels[].responsesModel`),
 * answered `{id, status: "queued"}`; polled at `GET /responses/{id}` until
 * `completed` (the images are the `result` of its `image_generation_call`
 * output items), `failed`, `cancelled` or `incomplete`; cancelled at
 * `POST /responses/{id}/cancel`. The tool makes one image per call. A task
 * that asked for partial images is submitted with `stream: true`: the
 * response's events bring them (see `background-stream.ts`), and the job is
 * polled if the stream ends first.
 */
export const openaiBackgroundJob: JobDialect = {
  name: "openai-background",
  imageKey: "result",

  async submission(task, files, channel) {
    const tool = toolOf(task, files);
    // Partial images come only in the response's event stream: asked for, it is read first.
    if (task.partialImages) tool.partial_images = task.partialImages;
    const body = {
      model: channel.responsesModel,
      input: inputOf(task, files),
      tools: [tool],
      tool_choice: { type: "image_generation" },
      background: true,
      store: true,
      ...(task.partialImages ? { stream: true } : {}),
    };
    return {
      path: "/responses",
      headers: { "content-type": "application/json" },
      body: Buffer.from(JSON.stringify(body)),
    };
  },

  poll: (id) => ({ path: `/responses/${segment(id)}` }),

  cancel: (id) => ({ path: `/responses/${segment(id)}/cancel` }),

  idOf: (body) => text(body.id),

  async stateOf({ body, source }): Promise<JobState> {
    const { scrubber } = source;
    switch (body.status) {
      case "completed": {
        const images = await imagesOf(body.output, source);
        const usage = scrubDeep(body.usage, scrubber, 0);
        return { kind: "completed", images, ...(usage === undefined ? {} : { usage }) };
      }
      case "failed":
        return { kind: "failed", failure: jobFailure(body.error, undefined, scrubber) };
      case "cancelled":
        return {
          kind: "failed",
          failure: new TaskFailure(
            "upstream_error",
            "The upstream channel cancelled the background response.",
            "upstream_error",
          ),
        };
      case "incomplete": {
        const details = isObject(body.incomplete_details) ? body.incomplete_details : {};
        const reason = text(details.reason) ?? "unknown";
        return {
          kind: "failed",
          failure: new TaskFailure(
            "upstream_error",
            `The upstream channel's background response ended incomplete (${scrubber.scrubString(reason).slice(0, 100)}).`,
            "upstream_error",
          ),
        };
      }
      default:
        return { kind: "running" };
    }
  },
};

/** The prompt as input; an edit's images as `input_image` data URLs beside it. */
function inputOf(task: TaskRecord, files: EditFile[] | undefined): unknown {
  const prompt = String(task.request.prompt ?? "");
  const images = (files ?? []).filter((file) => file.field !== "mask");
  if (images.length === 0) return prompt;
  return [
    {
      role: "user",
      content: [
        { type: "input_text", text: prompt },
        ...images.map((file) => ({ type: "input_image", image_url: dataUrl(file) })),
      ],
    },
  ];
}

/** The `image_generation` tool: the task's model and image parameters, an edit's mask. */
function toolOf(task: TaskRecord, files: EditFile[] | undefined): Record<string, unknown> {
  const tool: Record<string, unknown> = { type: "image_generation", model: task.model };
  for (const field of TOOL_FIELDS) {
    const value = task.request[field];
    if (value !== undefined && value !== null) tool[field] = value;
  }
  const mask = files?.find((file) => file.field === "mask");
  if (mask) tool.input_image_mask = { image_url: dataUrl(mask) };
  return tool;
}

function dataUrl(file: EditFile): string {
  return `data:${file.mime};base64,${file.bytes.toString("base64")}`;
}

/**
 * The images of a completed response: its `image_generation_call` items' `result`. One that
 * cannot be had (too large, no image) is dropped when another can, as in any answer of several
 * images (`decodeEach`).
 */
async function imagesOf(output: unknown, source: GenerationSource): Promise<GeneratedImage[]> {
  const items = Array.isArray(output) ? output.filter(isObject) : [];
  const calls = items.filter((item) => item.type === "image_generation_call");
  const images = await decodeEach(calls, (call) => imageOf(call, source), source);
  if (images.length > 0) return images;
  throw invalidResponse("completed without an image (no image_generation_call result)");
}

/** One `image_generation_call`'s image, checked; undefined when it holds none. */
function imageOf(
  call: Record<string, unknown>,
  source: GenerationSource,
): GeneratedImage | undefined {
  const bytes = base64Image(call.result, source);
  return bytes && checkedImage(bytes, text(call.revised_prompt), source);
}
