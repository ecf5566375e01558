import type { McpServer, RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type {
  CallToolResult,
  ServerNotification,
  ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { ImageTaskApiError } from "../client/image-task-api-error.js";
import type { ImageTask } from "../client/image-task-api-client.js";
import { createProgressNotifier, describeTaskEvent } from "../client/progress-notifier.js";
import { TASK_ID_PATTERN } from "../../contract/task-contract.js";
import { isFinished, waitForTask } from "../client/wait-for-task.js";
import { deliverFiles, deliverLinks, filesResult, linkRebase } from "./deliver-task-images.js";
import type { ImageToolDeps } from "./image-tool-deps.js";
import { failedResult, summarize } from "./task-summary.js";
import { describeToolFailure, toolError } from "./tool-result.js";

/** The longest wait one call may ask for: safely under the ~60 s MCP clients allow a call. */
const MAX_WAIT_SECONDS = 25;
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

/** What the SDK hands a tool call besides its arguments. */
type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

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
    (args, extra) => checkImageTask(deps, args, extra),
  );
}

/** One call: wait (with progress), then answer what the task is. */
async function checkImageTask(
  deps: ImageToolDeps,
  args: { task_id: string; wait_seconds?: number | undefined },
  extra: ToolExtra,
): Promise<CallToolResult> {
  const taskId = args.task_id;
  const waitSeconds = args.wait_seconds ?? DEFAULT_WAIT_SECONDS;
  const notify = progressNotifier(extra, waitSeconds);
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
    return await answerTask(deps, taskId, waitSeconds, snapshot.task, extra.signal);
  } catch (error) {
    return answerFailure(deps, taskId, error, extra.signal);
  }
}

/**
 * With a progress token: the task's own events (started, each partial image, done) and a
 * tick every progressIntervalMs, so that a client resetting its timeout on progress waits.
 */
function progressNotifier(extra: ToolExtra, waitSeconds: number) {
  const progressToken = extra._meta?.progressToken;
  return progressToken === undefined
    ? undefined
    : createProgressNotifier({
        total: waitSeconds,
        send: (params) =>
          extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken, ...params },
          }),
      });
}

/** The task after the wait: failed, still running, or completed with its images delivered. */
async function answerTask(
  deps: ImageToolDeps,
  taskId: string,
  waitSeconds: number,
  task: ImageTask,
  signal: AbortSignal,
): Promise<CallToolResult> {
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
  const { delivery } = deps;
  return delivery.kind === "files"
    ? await deliverFiles(delivery.sink, deps, task, summary, signal)
    : deliverLinks(
        task,
        summary,
        deps.api.baseUrl,
        linkRebase(deps.api.baseUrl, delivery.publicOrigin),
      );
}

/**
 * A call that failed: rethrown once the client went away; files the service
 * has forgotten but the disk still holds; else a tool error saying why.
 */
async function answerFailure(
  deps: ImageToolDeps,
  taskId: string,
  error: unknown,
  signal: AbortSignal,
): Promise<CallToolResult> {
  if (signal.aborted) throw error;
  const { delivery } = deps;
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
