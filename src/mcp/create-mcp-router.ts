import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import express, { type Request, type Response, type Router } from "express";
import type { Logger } from "pino";
import { getPrincipal } from "../auth/principal.js";
import { contextOf } from "../observability/request-context.js";
import { publicBaseUrl, type PublicOrigin } from "../http/public-base-url.js";
import type { ImageTasks } from "../tasks/create-image-tasks.js";
import { createMcpServer } from "./create-mcp-server.js";
import { createInProcessTaskApiClient } from "./in-process-task-api-client.js";

/** What the `/mcp` route needs from the service. */
export interface CreateMcpRouterDeps {
  /** The task feature, called in process with the caller's principal. */
  tasks: ImageTasks;
  /** `Retry-After` of unfinished tasks (`imageTasks.pollIntervalSec`). */
  pollIntervalSec: number;
  logger: Logger;
  /** Where the origin of the image links comes from (`server.publicBaseUrl`, `trustProxy`). */
  origin: PublicOrigin;
}

/**
 * Serves the MCP tools over stateless Streamable HTTP, mounted behind the service's bearer auth.
 * Every POST gets its own server, and the tools call the task service in process as the
 * authenticated caller, so a remote client sees exactly its key's tasks and models (and
 * `check_image_task` waits on the service itself); finished images are returned as links to
 * their signed URLs because the client's disk is out of reach.
 */
export function createMcpRouter(deps: CreateMcpRouterDeps): Router {
  const router = express.Router();

  router.post("/", async (req: Request, res: Response) => {
    // Same origin rule as the service's own URLs; a poisoned Host is refused here (400).
    const publicOrigin = publicBaseUrl(req, deps.origin);
    const api = createInProcessTaskApiClient({
      tasks: deps.tasks,
      principal: getPrincipal(res),
      publicOrigin,
      pollIntervalSec: deps.pollIntervalSec,
      credentialHint: "Check the bearer key your MCP client sends to /mcp.",
      span: contextOf(res)?.span,
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
      await transport.handleRequest(req, res, req.body);
    } catch (error) {
      deps.logger.error({ err: error }, "MCP request failed");
      if (!res.headersSent) {
        res.status(500).json(jsonRpcError(-32603, "Internal error"));
      }
    }
  });

  const methodNotAllowed = (_req: Request, res: Response) => {
    res
      .status(405)
      .set("Allow", "POST")
      .json(
        jsonRpcError(-32000, "Method not allowed: this stateless MCP endpoint accepts only POST."),
      );
  };
  router.get("/", methodNotAllowed);
  router.delete("/", methodNotAllowed);
  return router;
}

function jsonRpcError(code: number, message: string) {
  return { jsonrpc: "2.0", error: { code, message }, id: null };
}
