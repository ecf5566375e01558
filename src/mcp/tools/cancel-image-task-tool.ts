import type { McpServer, RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { TASK_ID_PATTERN } from "../../contract/task-contract.js";
import type { ImageToolDeps } from "./image-tool-deps.js";
import { describeToolFailure, toolError } from "./tool-result.js";

const inputSchema = {
  task_id: z
    .string()
    .regex(TASK_ID_PATTERN, 'task_id must be the id generate_image returned, "task_..."')
    .describe("The task_id returned by generate_image."),
};

const outputSchema = {
  task_id: z.string(),
  status: z.enum(["queued", "in_progress", "completed", "failed"]),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
};

/**
 * Registers `cancel_image_task`, so an agent that no longer needs an image frees the queue slot
 * and stops the upstream call instead of leaving it to run for minutes.
 */
export function registerCancelImageTaskTool(
  server: McpServer,
  deps: ImageToolDeps,
): RegisteredTool {
  return server.registerTool(
    "cancel_image_task",
    {
      title: "Cancel image task",
      description:
        "Cancel a queued or running image task started by generate_image. A task that has " +
        "already finished is left as it is and its status is returned.",
      inputSchema,
      outputSchema,
      annotations: {
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: true,
        openWorldHint: true,
      },
    },
    async (args, extra) => {
      try {
        const task = await deps.api.cancelTask(args.task_id, extra.signal);
        const structuredContent: z.infer<z.ZodObject<typeof outputSchema>> = {
          task_id: task.id,
          status: task.status,
        };
        if (task.status === "failed") {
          structuredContent.error = {
            code: task.error?.code ?? "unknown_error",
            message: task.error?.message ?? "",
          };
        }
        const text =
          task.status === "failed" && task.error?.code === "cancelled"
            ? `Task ${task.id} is cancelled.`
            : task.status === "completed"
              ? `Task ${task.id} had already completed; collect it with check_image_task.`
              : task.status === "failed"
                ? `Task ${task.id} had already failed (${structuredContent.error?.code}).`
                : `Task ${task.id} is ${task.status.replace("_", " ")}; cancellation requested.`;
        return { structuredContent, content: [{ type: "text", text }] };
      } catch (error) {
        if (extra.signal.aborted) throw error;
        deps.logger?.info({ err: error, tool: "cancel_image_task" }, "tool call failed");
        return toolError(`Could not cancel task ${args.task_id}. ${describeToolFailure(error)}`);
      }
    },
  );
}
