import { spawn } from "node:child_process";
import { existsSync, promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

const CLI = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe("image-task-sidecar mcp over stdio (the package bin, as an editor starts it)", () => {
  let app: TestApp;
  let scratch: string;

  beforeAll(async () => {
    if (!existsSync(CLI)) {
      throw new Error(`${CLI} is missing: run \`npm run build\` before the tests.`);
    }
    app = await startTestApp();
    scratch = await fs.mkdtemp(path.join(os.tmpdir(), "mcp-stdio-"));
  });
  afterAll(async () => {
    await app?.close();
    if (scratch) await fs.rm(scratch, { recursive: true, force: true });
  });

  async function spawnClient(env: Record<string, string>) {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, "mcp"],
      env,
      cwd: scratch,
      stderr: "pipe",
    });
    const stderr: string[] = [];
    transport.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk.toString()));
    const client = new Client({ name: "stdio-test", version: "1.0.0" });
    const protocolErrors: Error[] = [];
    client.onerror = (error) => protocolErrors.push(error);
    await client.connect(transport);
    return { client, stderr, protocolErrors };
  }
  const text = (r: CallToolResult) =>
    r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

  it("generates and saves the images into IMAGE_OUTPUT_DIR", async () => {
    app.upstream.behave("images", { kind: "ok", delayMs: 300 });
    const outputDir = path.join(scratch, "out");
    const { client, stderr, protocolErrors } = await spawnClient({
      OPENAI_BASE_URL: app.baseURL,
      OPENAI_API_KEY: app.key,
      IMAGE_OUTPUT_DIR: outputDir,
    });
    try {
      const generated = (await client.callTool({
        name: "generate_image",
        arguments: { prompt: "a cat in a box" },
      })) as CallToolResult;
      expect(generated.isError, text(generated)).toBeFalsy();
      const taskId = (generated.structuredContent as { task_id: string }).task_id;

      let result: CallToolResult | undefined;
      for (let i = 0; i < 5; i++) {
        result = (await client.callTool({
          name: "check_image_task",
          arguments: { task_id: taskId, wait_seconds: 10 },
        })) as CallToolResult;
        if ((result.structuredContent as { status: string }).status === "completed") break;
      }
      expect(result?.isError, result && text(result)).toBeFalsy();
      const files = (result!.structuredContent as { files: Array<{ path: string }> }).files;
      expect(files.map((f) => f.path)).toEqual([
        path.join(await fs.realpath(outputDir), `${taskId}-0.png`),
      ]);
      expect((await fs.readFile(files[0]!.path)).subarray(0, 8)).toEqual(PNG_MAGIC);

      const again = (await client.callTool({
        name: "check_image_task",
        arguments: { task_id: taskId, wait_seconds: 0 },
      })) as CallToolResult;
      expect((again.structuredContent as { files: unknown }).files).toEqual(files);

      const escape = (await client.callTool({
        name: "check_image_task",
        arguments: { task_id: "../../etc/passwd", wait_seconds: 0 },
      })) as CallToolResult;
      expect(escape.isError).toBe(true);
      expect(protocolErrors).toEqual([]);
    } finally {
      await client.close();
    }
    // Logs go to stderr only, and never carry the key.
    expect(stderr.join("")).toContain("MCP server listening on stdio");
    expect(stderr.join("")).not.toContain(app.key);
  });

  it("gives a clear tool error for a bad key", async () => {
    const { client } = await spawnClient({
      OPENAI_BASE_URL: app.baseURL,
      OPENAI_API_KEY: "sk-wrong",
      IMAGE_OUTPUT_DIR: path.join(scratch, "bad-key"),
    });
    try {
      const result = (await client.callTool({
        name: "generate_image",
        arguments: { prompt: "x" },
      })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(text(result)).toContain("HTTP 401 invalid_api_key");
      expect(text(result)).toContain("OPENAI_API_KEY");
    } finally {
      await client.close();
    }
  });

  it("exits 2 naming the variable when OPENAI_BASE_URL is missing", async () => {
    const child = spawn(process.execPath, [CLI, "mcp"], {
      env: { PATH: process.env.PATH ?? "" },
      cwd: scratch,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code).toBe(2);
    expect(stderr).toContain("OPENAI_BASE_URL:");
    expect(stdout).toBe("");
  });
});
