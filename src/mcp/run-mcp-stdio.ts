import type { Readable, Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { pino, type Logger } from "pino";
import type { McpConfig } from "../config/mcp-config.js";
import { createMcpServer } from "./create-mcp-server.js";
import { createImageFileSink } from "./sink/image-file-sink.js";
import { createImageTaskApiClient } from "./client/image-task-api-client.js";

/** Test seams; the CLI passes none. */
export interface RunMcpStdioOptions {
  stdin?: Readable;
  stdout?: Writable;
  /** Must not write to stdout, which belongs to the MCP transport. Default: pino on stderr. */
  logger?: Logger;
}

/**
 * Serves the MCP tools over stdio for `image-task-sidecar mcp`, the way editors start local MCP
 * servers: images are saved into `config.outputDir`. Resolves when the client closes stdin, so
 * the CLI can exit. Stdout carries only MCP messages; logs go to stderr.
 */
export async function runMcpStdio(
  config: McpConfig,
  options: RunMcpStdioOptions = {},
): Promise<void> {
  const stdin = options.stdin ?? process.stdin;
  const stdout = options.stdout ?? process.stdout;
  const logger = options.logger ?? pino({ name: "image-task-sidecar-mcp" }, pino.destination(2));
  const api = createImageTaskApiClient({
    baseUrl: config.apiBaseUrl,
    authorization: config.apiKey ? `Bearer ${config.apiKey}` : undefined,
    credentialHint: config.apiKey
      ? "Check OPENAI_API_KEY in the MCP server's environment."
      : "Set OPENAI_API_KEY in the MCP server's environment to a key of the service.",
  });
  const server = createMcpServer({
    api,
    delivery: { kind: "files", sink: createImageFileSink({ outputDir: config.outputDir }) },
    logger,
  });
  const closed = new Promise<void>((resolve) => {
    server.server.onclose = resolve;
  });
  const transport = new StdioServerTransport(stdin, stdout);
  await server.connect(transport);
  stdin.once("end", () => void server.close());
  logger.info(
    { apiBaseUrl: config.apiBaseUrl, outputDir: config.outputDir, hasApiKey: !!config.apiKey },
    "MCP server listening on stdio",
  );
  await closed;
}
