import type { ImageTaskEvent } from "./image-task-api-client.js";

/** What one progress notification says (the progress token is the caller's to add). */
export interface ProgressParams {
  progress: number;
  total: number;
  message: string;
}

/**
 * Progress notifications for one tool call: `progress` is the seconds since
 * the call began, strictly rising as MCP asks. A periodic tick that would not
 * rise is dropped; an event never is (it is nudged past the last one).
 */
export function createProgressNotifier(options: {
  total: number;
  send: (params: ProgressParams) => Promise<void>;
}) {
  const started = performance.now();
  let last = -1;
  return (message: string, kind: "tick" | "event") => {
    let progress = Math.round(performance.now() - started) / 1000;
    if (progress <= last) {
      if (kind === "tick") return;
      progress = Math.round((last + 0.001) * 1000) / 1000;
    }
    last = progress;
    options.send({ progress, total: options.total, message }).catch(() => undefined);
  };
}

/** What a task event says to the user: started, a partial image (with its link), done. */
export function describeTaskEvent(taskId: string, event: ImageTaskEvent): string {
  switch (event.type) {
    case "queued":
      return `Task ${taskId} is queued`;
    case "in_progress":
      return `Task ${taskId} started`;
    case "partial_image": {
      const index = event.partialImageIndex ?? 0;
      const partials = (
        event.task as { partial_images?: Array<{ index?: unknown; url?: unknown }> }
      ).partial_images;
      const url = partials?.find((partial) => partial.index === index)?.url;
      return `Task ${taskId}: partial image ${index + 1} is ready${typeof url === "string" ? ` (${url})` : ""}`;
    }
    case "completed":
      return `Task ${taskId} is completed`;
    case "failed":
      return `Task ${taskId} failed (${event.task.error?.code ?? "unknown_error"})`;
  }
}
