import type { McpServer, RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult, ContentBlock } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { ImageFileSink, ImageSource, SavedImage } from "../image-file-sink.js";
import { ImageTaskApiError } from "../image-task-api-error.js";
import { formatBytes, type ImageTask } from "../image-task-api-client.js";
import { createProgressNotifier, describeTaskEvent } from "../progress-notifier.js";
import { imageTypeFromPath } from "../../files/image-type.js";
import { TASK_ID_PATTERN } from "../task-id.js";
import { isFinished, waitForTask } from "../wait-for-task.js";
import type { ImageToolDeps } from "./image-tool-deps.js";
import { describeToolFailure, toolError } from "./tool-result.js";

/** The longest wait one call may ask for: safely under the ~60 s MCP clients allow a call. */
export const MAX_WAIT_SECONDS = 25;
const DEFAULT_WAIT_SECONDS = 20;

const taskIdSchema = z
  .string()
  .regex(TASK_ID_PATTERN, 'task_id must be the id generate_image returned, "task_..."')
  .describe("The task_id returned by generate_image.");

const inputSchema = {
  task_id: taskIdSchema,
  wait_seconds: z
    .number()
    .min(0)
    .max(MAX_WAIT_SECONDS)
    .optional()
    .describe(
      `Wait up to this many seconds (0 to ${MAX_WAIT_SECONDS}) for the task to finish before ` +
        `answering. Default ${DEFAULT_WAIT_SECONDS}.`,
    ),
};

const statusSchema = z.enum(["queued", "in_progress", "completed", "failed"]);
const errorSchema = z.object({ code: z.string(), message: z.string() });
const commonOutput = {
  task_id: z.string(),
  status: statusSchema,
  model: z.string().optional(),
  created: z.number().optional(),
  expires_at: z
    .number()
    .optional()
    .describe("Unix seconds after which the service forgets the task and its images."),
  error: errorSchema.optional().describe("Why the task failed."),
};

const savedFileSchema = z.object({
  path: z.string().describe("Absolute path of the saved image."),
  bytes: z.number().int(),
  mime_type: z.string(),
});
const linkedFileSchema = z.object({
  url: z.string().describe("Signed URL; fetch it without an Authorization header."),
  mime_type: z.string(),
});

type TaskSummary = {
  task_id: string;
  status: z.infer<typeof statusSchema>;
  model?: string;
  created?: number;
  expires_at?: number;
  error?: z.infer<typeof errorSchema>;
};

/**
 * Registers `check_image_task`: waits a bounded time, sending progress notifications when asked,
 * then delivers a finished task's images (saved files over stdio, signed links over HTTP). A
 * failed task is a tool error so the model cannot mistake it for success.
 */
export function registerCheckImageTaskTool(server: McpServer, deps: ImageToolDeps): RegisteredTool {
  const delivery = deps.delivery;
  const files = delivery.kind === "files" ? savedFileSchema : linkedFileSchema;
  return server.registerTool(
    "check_image_task",
    {
      title: "Check image task",
      description:
        delivery.kind === "files"
          ? "Check an image task started by generate_image, waiting up to wait_seconds for it " +
            "to finish. When completed, saves every image into the output directory as " +
            "<task_id>-<index>.<ext> and returns the file paths (calling again returns the same " +
            "paths). If it is still running, call again."
          : "Check an image task started by generate_image, waiting up to wait_seconds for it " +
            "to finish. When completed, returns a signed URL (resource_link) for every image; " +
            "the URLs work without an Authorization header until the task expires. If it is " +
            "still running, call again.",
      inputSchema,
      outputSchema: { ...commonOutput, files: z.array(files).optional() },
      annotations: {
        readOnlyHint: delivery.kind === "links",
        destructiveHint: false,
        idempotentHint: true,
        openWorldHint: true,
      },
    },
    async (args, extra) => {
      const taskId = args.task_id;
      const waitSeconds = args.wait_seconds ?? DEFAULT_WAIT_SECONDS;
      const progressToken = extra._meta?.progressToken;
      // With a progress token: the task's own events (started, each partial image, done) and a
      // tick every progressIntervalMs, so that a client resetting its timeout on progress waits.
      const notify =
        progressToken === undefined
          ? undefined
          : createProgressNotifier({
              total: waitSeconds,
              send: (params) =>
                extra.sendNotification({
                  method: "notifications/progress",
                  params: { progressToken, ...params },
                }),
            });
      try {
        const snapshot = await waitForTask({
          api: deps.api,
          taskId,
          waitSeconds,
          pollIntervalMs: deps.pollIntervalMs,
          maxPollIntervalMs: deps.maxPollIntervalMs,
          progressIntervalMs: deps.progressIntervalMs,
          signal: extra.signal,
          onProgress:
            notify &&
            ((_elapsed, seen) =>
              notify(
                seen
                  ? `Task ${taskId} is ${seen.task.status.replace("_", " ")}`
                  : `Waiting for task ${taskId}`,
                "tick",
              )),
          onEvent: notify && ((event) => notify(describeTaskEvent(taskId, event), "event")),
        });
        const task = snapshot.task;
        if (task.id !== taskId) {
          return toolError(`The image service answered with another task (${task.id}).`);
        }
        const summary = summarize(task);
        if (task.status === "failed") return failedResult(summary);
        if (!isFinished(task.status)) {
          return {
            structuredContent: summary,
            content: [
              {
                type: "text",
                text:
                  `Task ${taskId} is still ${task.status.replace("_", " ")} after waiting ` +
                  `${waitSeconds} s. Call check_image_task again with task_id "${taskId}".`,
              },
            ],
          };
        }
        const count = task.data?.length ?? 0;
        if (count > deps.maxImagesPerTask) {
          return toolError(
            `Task ${taskId} holds ${count} images, more than the ${deps.maxImagesPerTask} a task ` +
              `can have; nothing was saved. Check OPENAI_BASE_URL points at image-task-sidecar.`,
            summary,
          );
        }
        return delivery.kind === "files"
          ? await deliverFiles(delivery.sink, deps, task, summary, extra.signal)
          : deliverLinks(
              task,
              summary,
              deps.api.baseUrl,
              linkRebase(deps.api.baseUrl, delivery.publicOrigin),
            );
      } catch (error) {
        if (extra.signal.aborted) throw error;
        if (
          delivery.kind === "files" &&
          error instanceof ImageTaskApiError &&
          error.code === "task_not_found"
        ) {
          // The service forgot the task (retention), but the images may be on disk already.
          const saved = await delivery.sink.findSavedImages(taskId).catch(() => undefined);
          if (saved) return filesResult({ task_id: taskId, status: "completed" }, saved, true);
        }
        deps.logger?.info({ err: error, tool: "check_image_task" }, "tool call failed");
        return toolError(`Could not check task ${taskId}. ${describeToolFailure(error)}`);
      }
    },
  );
}

function summarize(task: ImageTask): TaskSummary {
  const summary: TaskSummary = { task_id: task.id, status: task.status };
  if (task.model) summary.model = task.model;
  if (typeof task.created === "number") summary.created = task.created;
  if (typeof task.expires_at === "number") summary.expires_at = task.expires_at;
  if (task.status === "failed") {
    summary.error = {
      code: task.error?.code ?? "unknown_error",
      message: task.error?.message ?? "The task failed without a message.",
    };
  }
  return summary;
}

function failedResult(summary: TaskSummary): CallToolResult {
  const error = summary.error ?? { code: "unknown_error", message: "" };
  const text =
    error.code === "cancelled"
      ? `Task ${summary.task_id} was cancelled.`
      : `Task ${summary.task_id} failed (${error.code}): ${error.message}`;
  return toolError(text, summary);
}

async function deliverFiles(
  sink: ImageFileSink,
  deps: ImageToolDeps,
  task: ImageTask,
  summary: TaskSummary,
  signal: AbortSignal,
): Promise<CallToolResult> {
  const { api, maxImageBytes } = deps;
  const items = task.data ?? [];
  for (const [index, item] of items.entries()) {
    // Judged on the text, before decoding anything: 4 base64 characters hold 3 bytes.
    if (!item.url && item.b64_json && Math.floor(item.b64_json.length / 4) * 3 > maxImageBytes) {
      throw new ImageTaskApiError(
        "refused",
        `Image ${index} of ${task.id} is larger than ${formatBytes(maxImageBytes)}; ` +
          `nothing was saved.`,
      );
    }
  }
  const sources: ImageSource[] = items.map((item, index) => ({
    async load() {
      if (item.url) return api.downloadImage(item.url, signal);
      if (item.b64_json) return { bytes: Buffer.from(item.b64_json, "base64") };
      throw new ImageTaskApiError("protocol", `Image ${index} of ${task.id} has no url.`);
    },
  }));
  const saved = await sink.saveTaskImages(task.id, sources);
  return filesResult(summary, saved, false);
}

function filesResult(summary: TaskSummary, saved: SavedImage[], expired: boolean): CallToolResult {
  const lines = saved.map((file) => `- ${file.path} (${file.bytes} bytes, ${file.mime_type})`);
  const head =
    saved.length === 0
      ? `Task ${summary.task_id} completed without images.`
      : `Task ${summary.task_id} completed; ${saved.length} image${
          saved.length === 1 ? "" : "s"
        } saved:`;
  const tail = expired
    ? ["(The task has expired on the service; these files were saved earlier.)"]
    : [];
  return {
    structuredContent: { ...summary, files: saved },
    content: [{ type: "text", text: [head, ...lines, ...tail].join("\n") }],
  };
}

/** Moves URLs signed on the API's (loopback) origin to the origin the client used. */
function linkRebase(apiBaseUrl: string, publicOrigin: string | undefined) {
  const from = new URL(apiBaseUrl).origin;
  const to = publicOrigin ? parseHttpUrl(publicOrigin)?.origin : undefined;
  return (url: URL): URL => {
    if (!to || url.origin !== from || to === from) return url;
    return new URL(`${url.pathname}${url.search}`, to);
  };
}

function deliverLinks(
  task: ImageTask,
  summary: TaskSummary,
  apiBaseUrl: string,
  rebase: (url: URL) => URL,
): CallToolResult {
  const items = task.data ?? [];
  const files: Array<{ url: string; mime_type: string }> = [];
  const links: ContentBlock[] = [];
  for (const [index, item] of items.entries()) {
    const parsed = item.url ? parseHttpUrl(item.url, new URL(apiBaseUrl).origin) : undefined;
    const url = parsed && rebase(parsed);
    if (!url) {
      return toolError(
        `Image ${index} of ${task.id} has no URL (the task was submitted with response_format ` +
          `b64_json outside MCP); fetch it from the HTTP API instead.`,
      );
    }
    const type = imageTypeFromPath(url.pathname);
    const mimeType = type?.mimeType ?? "image/png";
    files.push({ url: url.href, mime_type: mimeType });
    links.push({
      type: "resource_link",
      uri: url.href,
      name: `${task.id}-${index}.${type?.ext ?? "png"}`,
      mimeType,
      description: `Image ${index} of task ${task.id}; signed URL, no Authorization header needed.`,
    });
  }
  const expiry =
    summary.expires_at === undefined
      ? ""
      : ` The links work until ${new Date(summary.expires_at * 1000).toISOString()}.`;
  return {
    structuredContent: { ...summary, files },
    content: [
      {
        type: "text",
        text:
          files.length === 0
            ? `Task ${task.id} completed without images.`
            : `Task ${task.id} completed; ${files.length} image(s):\n` +
              files.map((file) => `- ${file.url}`).join("\n") +
              expiry,
      },
      ...links,
    ],
  };
}

function parseHttpUrl(value: string, base?: string): URL | undefined {
  try {
    const url = new URL(value, base);
    return url.protocol === "http:" || url.protocol === "https:" ? url : undefined;
  } catch {
    return undefined;
  }
}
