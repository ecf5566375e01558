import type { CallToolResult, ContentBlock } from "@modelcontextprotocol/sdk/types.js";
import { imageTypeFromPath } from "../../images/image-type.js";
import type { ImageFileSink, ImageSource, SavedImage } from "../sink/image-file-sink.js";
import { ImageTaskApiError } from "../client/image-task-api-error.js";
import { formatBytes, type ImageTask } from "../client/image-task-api-client.js";
import type { ImageToolDeps } from "./image-tool-deps.js";
import type { TaskSummary } from "./task-summary.js";
import { toolError } from "./tool-result.js";

/**
 * Saves a completed task's images into the sink (stdio): downloaded from their
 * URLs, or decoded from `b64_json` within `maxImageBytes`.
 */
export async function deliverFiles(
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

/** The saved files as the tool's answer; `expired` when the service has forgotten the task. */
export function filesResult(
  summary: TaskSummary,
  saved: SavedImage[],
  expired: boolean,
): CallToolResult {
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
export function linkRebase(apiBaseUrl: string, publicOrigin: string | undefined) {
  const from = new URL(apiBaseUrl).origin;
  const to = publicOrigin ? parseHttpUrl(publicOrigin)?.origin : undefined;
  return (url: URL): URL => {
    if (!to || url.origin !== from || to === from) return url;
    return new URL(`${url.pathname}${url.search}`, to);
  };
}

/** A completed task's images as links to their signed URLs (HTTP), `rebase`d. */
export function deliverLinks(
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
