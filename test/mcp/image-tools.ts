import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, afterEach, beforeAll, beforeEach, expect } from "vitest";
import { createMcpServer } from "../../src/mcp/create-mcp-server.js";
import { createImageFileSink } from "../../src/mcp/sink/image-file-sink.js";
import { createImageTaskApiClient } from "../../src/mcp/client/image-task-api-client.js";
import { connectInMemory } from "./connect-in-memory.js";
import { startFakeImageTaskApi, type FakeImageTaskApi } from "./fake-image-task-api.js";

// The MCP server's tools over an in-memory transport against a fake task API, for the
// image-tools test files. The bindings below are live: each file's hooks (useImageTools) set
// them, and the tests read them as they are at that moment.

export const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export let api: FakeImageTaskApi;
/** The sink's directory, inside `scratch` (not made until the first save). */
export let outputDir: string;
/** A fresh directory per test. */
export let scratch: string;
export let client: Client;
/** Closes `client` (a test may then `connect` anew). */
export let closeClient: () => Promise<void>;

/**
 * Registers the file's hooks: the fake API for the file, and per test a fresh
 * scratch directory, a plan of one pending poll then completed, and a client
 * connected with files delivery.
 */
export function useImageTools(): void {
  beforeAll(async () => {
    api = await startFakeImageTaskApi();
  });
  afterAll(async () => {
    await api.close();
  });

  beforeEach(async () => {
    scratch = await fs.mkdtemp(path.join(os.tmpdir(), "mcp-tools-"));
    outputDir = path.join(scratch, "out");
    api.plan({ pendingPolls: 1, outcome: { kind: "completed" } });
    api.failSubmissions(undefined);
    await connect();
  });
  afterEach(async () => {
    await closeClient();
    await fs.rm(scratch, { recursive: true, force: true });
  });
}

/** (Re)connects `client` to a new MCP server with these options. */
export async function connect(
  options: {
    key?: string;
    delivery?: "files" | "links";
    baseURL?: string;
    publicOrigin?: string;
  } = {},
) {
  const server = createMcpServer({
    api: createImageTaskApiClient({
      baseUrl: options.baseURL ?? api.baseURL,
      authorization: `Bearer ${options.key ?? api.key}`,
      credentialHint: "Check OPENAI_API_KEY.",
    }),
    delivery:
      options.delivery === "links"
        ? { kind: "links", publicOrigin: options.publicOrigin }
        : { kind: "files", sink: createImageFileSink({ outputDir }) },
    pollIntervalMs: 20,
    maxPollIntervalMs: 50,
  });
  ({ client, close: closeClient } = await connectInMemory(server));
}

/** Calls a tool. */
export async function call(name: string, args: Record<string, unknown>) {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}
/** A result's text content. */
export function text(result: CallToolResult): string {
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}
/** Submits through generate_image; resolves the task id. */
export async function submit(args: Record<string, unknown> = {}) {
  const result = await call("generate_image", { prompt: "a red square", ...args });
  expect(result.isError, text(result)).toBeFalsy();
  return (result.structuredContent as { task_id: string }).task_id;
}
