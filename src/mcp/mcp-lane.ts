import type { ServerResponse } from "node:http";
import type { Lane, LaneCall } from "../http/lane.js";
import { sendJson } from "../http/send-json.js";
import { createRouteTable } from "../http/route-table.js";
import { jsonRpcError } from "./json-rpc-error.js";
import type { McpLaneDeps } from "./serve-mcp-request.js";

export type { McpLaneDeps } from "./serve-mcp-request.js";

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

/**
 * The MCP SDK (its transport, ajv, zod-to-json-schema, hono: a fifth of the
 * service's start-up CPU) is loaded on the first MCP call (Node keeps the
 * module after it): most deployments never call `/mcp`, and every replica of
 * a rollout starts faster.
 */
async function serveMcp(deps: McpLaneDeps, call: LaneCall): Promise<void> {
  const { serveMcpRequest } = await import("./serve-mcp-request.js");
  await serveMcpRequest(deps, call);
}

function methodNotAllowed(res: ServerResponse): void {
  const refusal = "Method not allowed: this stateless MCP endpoint accepts only POST.";
  sendJson(res, 405, jsonRpcError(-32000, refusal), { Allow: "POST" });
}
