import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ImageTaskApiError } from "../client/image-task-api-error.js";
import { ImageFileSinkError } from "../sink/image-file-sink-error.js";

/**
 * A failed tool call as MCP wants it (`isError: true`), so that the model reads the reason and
 * can react, instead of the client seeing a protocol error.
 */
export function toolError(
  message: string,
  structuredContent?: Record<string, unknown>,
): CallToolResult {
  return {
    isError: true,
    content: [{ type: "text", text: message }],
    ...(structuredContent ? { structuredContent } : {}),
  };
}

/**
 * The message to show for an unexpected failure: ours are already written for the user, anything
 * else gets a generic line so no stack or internal detail reaches the model.
 */
export function describeToolFailure(error: unknown): string {
  if (error instanceof ImageTaskApiError || error instanceof ImageFileSinkError) {
    return error.message;
  }
  return `Internal error in the image-task MCP server (${
    error instanceof Error ? error.name : "unknown"
  }); see its log.`;
}
