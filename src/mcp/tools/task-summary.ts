import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { ImageTask } from "../client/image-task-api-client.js";
import { toolError } from "./tool-result.js";

/** What `check_image_task` says of a task besides its images (its structured content). */
export type TaskSummary = {
  task_id: string;
  status: ImageTask["status"];
  model?: string;
  created?: number;
  expires_at?: number;
  error?: { code: string; message: string };
};

/** The task's summary; a failed task's error always has a code and a message. */
export function summarize(task: ImageTask): TaskSummary {
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

/** A failed task as a tool error, so the model cannot mistake it for success. */
export function failedResult(summary: TaskSummary): CallToolResult {
  const error = summary.error ?? { code: "unknown_error", message: "" };
  const text =
    error.code === "cancelled"
      ? `Task ${summary.task_id} was cancelled.`
      : `Task ${summary.task_id} failed (${error.code}): ${error.message}`;
  return toolError(text, summary);
}
