import type { ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { Logger } from "pino";
import { readJsonBody, type JsonBodyOptions } from "../http/json-body.js";
import { callerOf, type Lane, type LaneCall } from "../http/lane.js";
import { publicBaseUrl, type PublicOrigin } from "../http/public-base-url.js";
import { sendJson } from "../http/send-json.js";
import { createRouteTable } from "../http/route-table.js";
import type { ImageTasks } from "../tasks/create-image-tasks.js";
import { createMcpServer } from "./create-mcp-server.js";
import { createInProcessTaskApiClient } from "./in-process-task-api-client.js";

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

const ROUTES = [
  { method: "POST", template: "/mcp" },
  { method: "GET", template: "/mcp" },
  { method: "DELETE", template: "/mcp" },
] as const;

/**
 * The MCP tools over stateless Streamable HTTP at `/mcp`, behind the service's
 * bearer auth (this is MCP's HTTP transport). Every POST gets its own server,
 * and the tools call the task service in process as the authenticated caller,
 * so a remote client sees exactly its key's tasks and models (and
 * `check_image_task` waits on the service itself); finished images are
 * returned as links to their signed URLs because the client's disk is out of
 * reach. `GET` and `DELETE` (sessions, server-sent streams) answer 405.
 */
export function createMcpLane(deps: McpLaneDeps): Lane {
  const table = createRouteTable(ROUTES);
  return {
    match(method, path) {
      const hit = table(method, path);
      if (!hit) return undefined;
      return {
        template: "/mcp",
        auth: true,
        serve: (call) =>
          hit.route.method === "POST" ? serveMcp(deps, call) : methodNotAllowed(call.res),
      };
    },
  };
}

async function serveMcp(deps: McpLaneDeps, call: LaneCall): Promise<void> {
  const { req, res } = call;
  // Same origin rule as the service's own URLs; a poisoned Host is refused here (400).
  const publicOrigin = publicBaseUrl(req, deps.origin);
  const body = (await readJsonBody(req, deps.body))?.value;
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

function methodNotAllowed(res: ServerResponse): void {
  const refusal = "Method not allowed: this stateless MCP endpoint accepts only POST.";
  sendJson(res, 405, jsonRpcError(-32000, refusal), { Allow: "POST" });
}

function jsonRpcError(code: number, message: string) {
  return { jsonrpc: "2.0", error: { code, message }, id: null };
}
