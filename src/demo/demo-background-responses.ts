import { createHash } from "node:crypto";
import { isDemoJobId, type DemoJob } from "./demo-background-jobs.js";
import {
  DemoRequestError,
  invalidParam,
  isJsonObject,
  missingParam,
  sendJson,
  wholeNumber,
} from "./demo-http-helpers.js";
import { streamBackgroundJob } from "./demo-background-stream.js";
import type { DrawRequest } from "./draw-demo-images.js";
import type { DemoContext, DemoHandler } from "./demo-route.js";
import { parseDemoImageSize } from "./draw-demo-image.js";

type Json = Record<string, unknown>;

/*
 * OpenAI's background mode for images, answered by the demo: a Responses call
 * with `background: true` and the `image_generation` tool is a job of the
 * demo's (kept in memory, finished after `imageDelayMs`), polled with
 * `GET /v1/responses/{id}` and cancelled with `POST /v1/responses/{id}/cancel`,
 * so a channel `type: demo` with `async: openai-background` can be tried with
 * no account. Other Responses calls are `demo-responses.ts`'s.
 */

/** Whether a Responses request is a background call of the `image_generation` tool. */
export function isBackgroundImageRequest(body: Json): boolean {
  return (
    body.background === true &&
    Array.isArray(body.tools) &&
    body.tools.some((tool) => isJsonObject(tool) && tool.type === "image_generation")
  );
}

/**
 * `POST /v1/responses`, background with the image tool: answered `queued`,
 * drawn later; with `stream: true`, its events (partial images included, as
 * the tool's `partial_images` asks) until it ends. The job goes on if the
 * stream's client leaves.
 */
export async function startBackgroundImageResponse(
  res: Parameters<DemoHandler>[1],
  body: Json,
  context: DemoContext,
): Promise<void> {
  if (typeof body.model !== "string" || body.model.length === 0) {
    throw new DemoRequestError(400, missingParam("model"));
  }
  if (body.store === false) {
    throw new DemoRequestError(
      400,
      invalidParam("store", "A background response must be stored: drop 'store: false'."),
    );
  }
  const tool = (body.tools as unknown[]).find(
    (item): item is Json => isJsonObject(item) && item.type === "image_generation",
  ) as Json;
  const size = parseDemoImageSize(tool.size);
  if (!size) {
    throw new DemoRequestError(
      400,
      invalidParam("tools", "The image tool's 'size' must be 'auto' or 'WIDTHxHEIGHT'."),
    );
  }
  const { prompt, images } = promptOf(body.input);
  const partials = wholeNumber(tool.partial_images, "partial_images", 0, 3, 0);
  const request: DrawRequest = {
    model: tool.model ?? "gpt-image-1",
    prompt,
    seed: images.length > 0 ? `${prompt}\u0000${hashOf(images)}` : prompt,
    n: 1,
    size,
    inputImages: images.length,
  };
  const job = context.jobs.start("openai-background", request, context.imageDelayMs, {
    model: body.model,
    tools: body.tools,
    tool_choice: body.tool_choice ?? "auto",
    tool,
  });
  if (body.stream === true) {
    await streamBackgroundJob(res, job, partials, context, responseOf);
    return;
  }
  sendJson(res, 200, responseOf(job, "queued"));
}

/** `GET /v1/responses/{id}` of a background image job (a restored one included). */
export const handleGetBackgroundResponse: DemoHandler = async (req, res, context, url) => {
  req.resume();
  sendJson(
    res,
    200,
    responseOf(jobOf(context, url, (id) => context.jobs.get(id, context.imageDelayMs))),
  );
};

/** `POST /v1/responses/{id}/cancel` of a background image job: `cancelled` while it runs. */
export const handleCancelBackgroundResponse: DemoHandler = async (req, res, context, url) => {
  req.resume();
  sendJson(res, 200, responseOf(jobOf(context, url, (id) => context.jobs.cancel(id))));
};

/**
 * A stored-response route that answers the demo's background image jobs with
 * `jobs`, and every other response with `responses`.
 */
export function backgroundJobsFirst(jobs: DemoHandler, responses: DemoHandler): DemoHandler {
  return (req, res, context, url) => {
    const id = decodeURIComponent(url.pathname.split("/")[3] ?? "");
    return (isDemoJobId(id) ? jobs : responses)(req, res, context, url);
  };
}

/** The job of `/v1/responses/{id}[/cancel]`, or OpenAI's 404. */
function jobOf(context: DemoContext, url: URL, find: (id: string) => DemoJob | undefined): DemoJob {
  const id = decodeURIComponent(url.pathname.split("/")[3] ?? "");
  const job = find(id);
  if (!job || job.dialect !== "openai-background") {
    throw new DemoRequestError(404, {
      message: `Response with id '${id.slice(0, 100)}' not found.`,
      type: "invalid_request_error",
      code: "not_found",
    });
  }
  return job;
}

/** The prompt (the input's text) and the input images' URLs of a Responses input. */
function promptOf(input: unknown): { prompt: string; images: string[] } {
  if (typeof input === "string") return { prompt: input, images: [] };
  const texts: string[] = [];
  const images: string[] = [];
  for (const item of Array.isArray(input) ? input : []) {
    if (!isJsonObject(item)) continue;
    if (typeof item.content === "string") texts.push(item.content);
    for (const part of Array.isArray(item.content) ? item.content : []) {
      if (!isJsonObject(part)) continue;
      if (part.type === "input_text" && typeof part.text === "string") texts.push(part.text);
      if (part.type === "input_image") images.push(String(part.image_url ?? part.file_id ?? ""));
    }
  }
  const prompt = texts.join("\n");
  if (!prompt) throw new DemoRequestError(400, missingParam("input"));
  return { prompt, images };
}

function hashOf(values: string[]): string {
  const hash = createHash("sha256");
  for (const value of values) hash.update(value).update("\u0000");
  return hash.digest("hex");
}

/** The Response object of a job, as OpenAI shapes a background response. */
export function responseOf(job: DemoJob, status?: string): Json {
  const tool = isJsonObject(job.extra.tool) ? job.extra.tool : {};
  const done = job.state !== "running";
  const image = (job.result?.data as Json[] | undefined)?.[0];
  const usage = isJsonObject(job.result?.usage) ? job.result.usage : undefined;
  return {
    id: job.id,
    object: "response",
    created_at: job.createdAt,
    status: status ?? (job.state === "running" ? "in_progress" : job.state),
    background: true,
    completed_at: done ? (job.completedAt ?? null) : null,
    error:
      job.state === "failed"
        ? { code: job.error?.code ?? "server_error", message: job.error?.message ?? "failed" }
        : null,
    incomplete_details: null,
    model: job.extra.model ?? "demo",
    output:
      job.state === "completed" && image
        ? [
            {
              id: `ig_${job.id.slice("resp_".length, "resp_".length + 24)}`,
              type: "image_generation_call",
              status: "completed",
              background: tool.background ?? "opaque",
              output_format: "png",
              quality: tool.quality ?? "auto",
              size: `${job.request.size.width}x${job.request.size.height}`,
              revised_prompt: job.request.prompt ?? "",
              result: image.b64_json,
            },
          ]
        : [],
    store: true,
    tool_choice: job.extra.tool_choice ?? "auto",
    tools: job.extra.tools ?? [],
    usage:
      job.state === "completed" && usage
        ? {
            input_tokens: usage.input_tokens ?? 0,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: usage.output_tokens ?? 0,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: usage.total_tokens ?? 0,
          }
        : null,
  };
}
