import { readFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { Logger } from "pino";
import { MAX_IMAGE_BYTES, type ImageTaskApiClient } from "./client/image-task-api-client.js";
import { registerCancelImageTaskTool } from "./tools/cancel-image-task-tool.js";
import { registerCheckImageTaskTool } from "./tools/check-image-task-tool.js";
import { registerGenerateImageTool } from "./tools/generate-image-tool.js";
import type { ImageDelivery } from "./tools/image-tool-deps.js";

/** What an MCP server instance needs; one instance serves one client connection. */
export interface CreateMcpServerDeps {
  api: ImageTaskApiClient;
  delivery: ImageDelivery;
  logger?: Logger;
  /** Model for `generate_image` calls that name none. Default gpt-image-1. */
  defaultModel?: string;
  /**
   * Shortest pause before `check_image_task` asks again when the service
   * answered a wait early (a service that does not wait). Default 1000 ms.
   */
  pollIntervalMs?: number;
  /** Longest such pause, whatever `Retry-After` says. Default 2000 ms. */
  maxPollIntervalMs?: number;
  /** How often `check_image_task` sends progress while it waits. Default 5000 ms. */
  progressIntervalMs?: number;
  /** Images one task may deliver; more are refused. Default 10 (the API's largest `n`). */
  maxImagesPerTask?: number;
  /** Largest `b64_json` image saved, decoded. Default 64 MiB. */
  maxImageBytes?: number;
}

/** The API's largest `n`: a task holding more images is not one of ours. */
export const MAX_IMAGES_PER_TASK = 10;

/** The model `generate_image` uses when the caller names none. */
export const DEFAULT_IMAGE_MODEL = "gpt-image-1";

const INSTRUCTIONS =
  "Image generation takes from 30 seconds to several minutes, longer than one tool call may " +
  "last. Call generate_image to start a task, then call check_image_task with its task_id " +
  "(wait_seconds up to 25) until the status is completed or failed. Use cancel_image_task for " +
  "images no longer needed.";

/**
 * Builds the MCP server with the image tools over any transport; stdio and Streamable HTTP differ
 * only in the API client (whose credentials) and the delivery of finished images.
 */
export function createMcpServer(deps: CreateMcpServerDeps): McpServer {
  const server = new McpServer(
    { name: "image-task-sidecar", title: "Image tasks", version: packageVersion() },
    { instructions: INSTRUCTIONS, capabilities: { tools: {} } },
  );
  const toolDeps = {
    api: deps.api,
    delivery: deps.delivery,
    logger: deps.logger,
    defaultModel: deps.defaultModel ?? DEFAULT_IMAGE_MODEL,
    pollIntervalMs: deps.pollIntervalMs ?? 1000,
    maxPollIntervalMs: deps.maxPollIntervalMs ?? 2000,
    progressIntervalMs: deps.progressIntervalMs ?? 5000,
    maxImagesPerTask: deps.maxImagesPerTask ?? MAX_IMAGES_PER_TASK,
    maxImageBytes: deps.maxImageBytes ?? MAX_IMAGE_BYTES,
  };
  registerGenerateImageTool(server, toolDeps);
  registerCheckImageTaskTool(server, toolDeps);
  registerCancelImageTaskTool(server, toolDeps);
  return server;
}

let cachedVersion: string | undefined;

/** Reported in `initialize`; read once from package.json, two levels above src/mcp and dist/mcp. */
function packageVersion(): string {
  if (cachedVersion === undefined) {
    try {
      const pkg = JSON.parse(
        readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
      ) as { version?: unknown };
      cachedVersion = typeof pkg.version === "string" ? pkg.version : "0.0.0";
    } catch {
      cachedVersion = "0.0.0";
    }
  }
  return cachedVersion;
}
