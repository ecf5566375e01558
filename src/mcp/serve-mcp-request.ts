import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { Logger } from "pino";
import { readJsonBody, type JsonBodyOptions } from "../http/json-body.js";
import { callerOf, type LaneCall } from "../http/lane.js";
import { publicBaseUrl, type PublicOrigin } from "../http/public-base-url.js";
import { sendJson } from "../http/send-json.js";
import type { ImageTasks } from "../tasks/create-image-tasks.js";
import { createMcpServer } from "./create-mcp-server.js";
import { createInProcessTaskApiClient } from "./in-process-task-api-client.js";
import { jsonRpcError } from "./json-rpc-error.js";

/** What the `/mcp` lane needs from the service. */
export interface McpLaneDeps {
  /** The task feature, called in process with the caller's principal. */
  tasks: ImageTasks;
  /** `Retry-After` of unfinished tasks (`imageTasks.pollIntervalSec`). */
  pollIntervalSec: number;
  logger: Logger;
  /** Where the origin of the image links comes from (`server.publicBaseUrl`, `trustProxy`). */
  origin: PublicOrigin;
  /**
   * The body's limits: read here, under the service's size and time limits (the MCP transport
   * would read the body itself without a deadline, so a client trickling bytes could hold a
   * request forever).
   */
  body: JsonBodyOptions;
}

/**
 * Serves one `POST /mcp`: a server of its own over a stateless Streamable HTTP
 * transport, its tools calling the task service in process as the caller.
 * This module (and the MCP SDK under it) is loaded on the first MCP call,
 * not at start-up: see `mcp-lane.ts`.
 */
export async function serveMcpRequest(deps: McpLaneDeps, call: LaneCall): Promise<void> {
  const { req, res } = call;
  // Same origin rule as the service's own URLs; a poisoned Host is refused here (400).
  const publicOrigin = publicBaseUrl(req, deps.origin);
  const body = (await readJsonBody(req, deps.body))?.value;
  // JSON-RPC 2.0 answers an empty batch with one Invalid Request error; the transport would take
  // it for a batch of notifications and answer 202, so a client would wait for nothing.
  if (Array.isArray(body) && body.length === 0) {
    sendJson(res, 400, jsonRpcError(-32600, "Invalid Request: an empty batch"));
    return;
  }
  const api = createInProcessTaskApiClient({
    tasks: deps.tasks,
    principal: callerOf(call),
    publicOrigin,
    pollIntervalSec: deps.pollIntervalSec,
    credentialHint: "Check the bearer key your MCP client sends to /mcp.",
    span: call.context.span,
  });
  const server = createMcpServer({
    api,
    delivery: { kind: "links", publicOrigin },
    logger: deps.logger,
  });
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on("close", () => {
    void transport.close();
    void server.close();
  });
  try {
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  } catch (error) {
    deps.logger.error({ err: error }, "MCP request failed");
    if (!res.headersSent) sendJson(res, 500, jsonRpcError(-32603, "Internal error"));
  }
}
