import { existsSync, promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished } from "vitest";
import { createMcpServer } from "../../src/mcp/create-mcp-server.js";
import { createImageFileSink } from "../../src/mcp/sink/image-file-sink.js";
import { createImageTaskApiClient } from "../../src/mcp/client/image-task-api-client.js";
import { connectInMemory } from "./connect-in-memory.js";
import { TINY_PNG, startFakeImageTaskApi, type FakeImageTaskApi } from "./fake-image-task-api.js";

// The local MCP server trusts nothing the service at OPENAI_BASE_URL answers: a hostile or
// broken one cannot make it hold or write more than a task's worth of images.

const CLI = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));

let api: FakeImageTaskApi;
let scratch: string;
let outputDir: string;

beforeAll(async () => {
  api = await startFakeImageTaskApi();
});
afterAll(() => api.close());
beforeEach(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), "mcp-hostile-"));
  outputDir = path.join(scratch, "out");
  onTestFinished(() => fs.rm(scratch, { recursive: true, force: true }));
});

const text = (r: CallToolResult) =>
  r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

async function savedFiles(): Promise<string[]> {
  return (await fs.readdir(outputDir).catch(() => [] as string[])).filter(
    (name) => !name.startsWith("."),
  );
}

/** The tools in memory against the fake service over HTTP, with limits a test can shrink. */
async function inMemory(limits: {
  maxImageBytes?: number;
  maxResponseBytes?: number;
  maxImagesPerTask?: number;
}) {
  const server = createMcpServer({
    api: createImageTaskApiClient({
      baseUrl: api.baseURL,
      authorization: `Bearer ${api.key}`,
      credentialHint: "Check OPENAI_API_KEY.",
      maxResponseBytes: limits.maxResponseBytes,
    }),
    delivery: { kind: "files", sink: createImageFileSink({ outputDir }) },
    pollIntervalMs: 20,
    maxPollIntervalMs: 50,
    maxImageBytes: limits.maxImageBytes,
    maxImagesPerTask: limits.maxImagesPerTask,
  });
  const { client, close } = await connectInMemory(server);
  onTestFinished(close);
  return async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
}

async function generateAndCheck(
  call: (n: string, a: Record<string, unknown>) => Promise<CallToolResult>,
) {
  const generated = await call("generate_image", { prompt: "x" });
  const taskId = (generated.structuredContent as { task_id: string }).task_id;
  return call("check_image_task", { task_id: taskId, wait_seconds: 5 });
}

describe("check_image_task against a hostile service (in memory)", () => {
  it("refuses a task with more images than a task can have, saving none", async () => {
    api.plan({ pendingPolls: 0, outcome: { kind: "b64", n: 300 } });
    const result = await generateAndCheck(await inMemory({}));
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/holds 300 images, more than the 10/);
    expect(await savedFiles()).toEqual([]);
  });

  it("refuses a b64_json image over the per-image limit before decoding, saving none", async () => {
    const big = Buffer.concat([TINY_PNG, Buffer.alloc(8 * 1024)]);
    api.plan({ pendingPolls: 0, outcome: { kind: "b64", n: 2, image: big } });
    const result = await generateAndCheck(await inMemory({ maxImageBytes: 4 * 1024 }));
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(
      /Image 0 of task_\S+ is larger than 4096 bytes; nothing was saved/,
    );
    expect(await savedFiles()).toEqual([]);
  });

  it("stops reading an endless answer at the answer limit", async () => {
    api.plan({ pendingPolls: 0, outcome: { kind: "endless" } });
    const result = await generateAndCheck(await inMemory({ maxResponseBytes: 1024 * 1024 }));
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/answer of the image service larger than 1 MiB/);
    expect(await savedFiles()).toEqual([]);
  });

  it("saves a task whose answers and image downloads a proxy holds open after their end", async () => {
    // Each read ends at its JSON object's or its image's end: held open, the tool call waited
    // for the client's timeout (60 s and more) and failed.
    api.plan({ pendingPolls: 1, outcome: { kind: "completed", n: 2 }, holdOpen: true });
    const result = await generateAndCheck(await inMemory({}));
    expect(result.isError, text(result)).toBeFalsy();
    const saved = await savedFiles();
    expect(saved).toHaveLength(2);
    for (const name of saved) {
      expect(await fs.readFile(path.join(outputDir, name))).toEqual(TINY_PNG);
    }
  });

  it("still saves a task within the limits", async () => {
    api.plan({ pendingPolls: 0, outcome: { kind: "b64", n: 10 } });
    const result = await generateAndCheck(await inMemory({}));
    expect(result.isError, text(result)).toBeFalsy();
    expect(await savedFiles()).toHaveLength(10);
  });
});

describe("image-task-sidecar mcp (the bin over stdio) against a hostile service", () => {
  async function spawnClient() {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first.`);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, "mcp"],
      env: { OPENAI_BASE_URL: api.baseURL, OPENAI_API_KEY: api.key, IMAGE_OUTPUT_DIR: outputDir },
      cwd: scratch,
      stderr: "pipe",
    });
    const client = new Client({ name: "hostile-test", version: "1.0.0" });
    await client.connect(transport);
    onTestFinished(() => client.close());
    return async (name: string, args: Record<string, unknown>) =>
      (await client.callTool({ name, arguments: args })) as CallToolResult;
  }

  it("writes none of 300 images and reads no more than 64 MiB of an endless answer", async () => {
    const call = await spawnClient();
    api.plan({ pendingPolls: 0, outcome: { kind: "b64", n: 300 } });
    const many = await generateAndCheck(call);
    expect(many.isError).toBe(true);
    expect(text(many)).toMatch(/holds 300 images/);

    api.plan({ pendingPolls: 0, outcome: { kind: "endless" } });
    const endless = await generateAndCheck(call);
    expect(endless.isError).toBe(true);
    expect(text(endless)).toMatch(/larger than 64 MiB/);
    expect(await savedFiles()).toEqual([]);
  });
});
