import type { McpServer, RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { isTaskId } from "../../contract/task-contract.js";
import type { ImageToolDeps } from "./image-tool-deps.js";
import { describeToolFailure, toolError } from "./tool-result.js";

const inputSchema = {
  prompt: z
    .string()
    .min(1)
    .max(32000)
    .describe("What to draw: a full description of the image (1 to 32000 characters)."),
  model: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe("Image model; a gpt-image-* model. Default gpt-image-1."),
  size: z
    .string()
    .regex(/^(auto|\d{2,5}x\d{2,5})$/, 'size is "auto" or WIDTHxHEIGHT, e.g. 1024x1024')
    .optional()
    .describe('"auto" or WIDTHxHEIGHT, e.g. 1024x1024, 1536x1024, 1024x1536.'),
  n: z.number().int().min(1).max(10).optional().describe("Number of images, 1 to 10. Default 1."),
  quality: z
    .enum(["auto", "low", "medium", "high", "standard", "hd"])
    .optional()
    .describe("Rendering quality; higher is slower."),
  background: z
    .enum(["auto", "transparent", "opaque"])
    .optional()
    .describe("transparent needs output_format png or webp."),
  output_format: z.enum(["png", "jpeg", "webp"]).optional().describe("File format. Default png."),
  partial_images: z
    .number()
    .int()
    .min(0)
    .max(3)
    .optional()
    .describe(
      "Drafts to make while the image is made (0 to 3, default 0): check_image_task reports " +
        "each one's link as progress.",
    ),
};

const outputSchema = {
  task_id: z.string().describe("Pass this to check_image_task."),
  status: z.enum(["queued", "in_progress", "completed", "failed"]),
  model: z.string(),
  created: z.number().describe("Unix seconds."),
};

/**
 * Registers `generate_image`. It only submits a task and returns within a second or two, because
 * image models take longer than MCP clients wait for one tool call; `check_image_task` collects
 * the result.
 */
export function registerGenerateImageTool(server: McpServer, deps: ImageToolDeps): RegisteredTool {
  return server.registerTool(
    "generate_image",
    {
      title: "Generate image",
      description:
        "Start generating images from a text prompt. Returns at once with a task_id; image " +
        "models take from 30 seconds to several minutes. Then call check_image_task with the " +
        "task_id (wait_seconds up to 25) until it is completed, which returns the images.",
      inputSchema,
      outputSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    async (args, extra) => {
      try {
        const task = await deps.api.submitTask(
          {
            model: args.model ?? deps.defaultModel,
            prompt: args.prompt,
            size: args.size,
            n: args.n,
            quality: args.quality,
            background: args.background,
            output_format: args.output_format,
            partial_images: args.partial_images,
            // Never base64: the MCP server fetches or links the image files instead.
            response_format: "url",
          },
          extra.signal,
        );
        if (!isTaskId(task.id)) {
          return toolError("The image service returned a malformed task id; nothing to check.");
        }
        const structuredContent = {
          task_id: task.id,
          status: task.status,
          model: task.model ?? args.model ?? deps.defaultModel,
          created: task.created ?? Math.floor(Date.now() / 1000),
        };
        return {
          structuredContent,
          content: [
            {
              type: "text",
              text:
                `Submitted image task ${task.id} (model ${structuredContent.model}, status ` +
                `${task.status}). Call check_image_task with task_id "${task.id}" and ` +
                `wait_seconds 25 to collect the images; repeat while it is still running.`,
            },
          ],
        };
      } catch (error) {
        if (extra.signal.aborted) throw error;
        deps.logger?.info({ err: error, tool: "generate_image" }, "tool call failed");
        return toolError(`Could not submit the image task. ${describeToolFailure(error)}`);
      }
    },
  );
}
