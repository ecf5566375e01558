import { existsSync, promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";
import { startS3Server, type TestS3Server } from "../support/s3-server.js";

/*
 * check_image_task, over stdio (the package bin) and over HTTP (/mcp),
 * whatever images.links says: the same tool results, images that open.
 */

const CLI = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));

let s3: TestS3Server;
let scratch: string;
beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first.`);
  s3 = await startS3Server();
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), "mcp-links-"));
});
afterAll(async () => {
  await s3?.close();
  await fs.rm(scratch, { recursive: true, force: true });
});

const text = (r: CallToolResult) =>
  r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

/** Calls check_image_task until the task is finished. */
async function checkUntilDone(client: Client, taskId: string): Promise<CallToolResult> {
  for (let i = 0; i < 10; i++) {
    const result = (await client.callTool({
      name: "check_image_task",
      arguments: { task_id: taskId, wait_seconds: 10 },
    })) as CallToolResult;
    const status = (result.structuredContent as { status?: string } | undefined)?.status;
    if (result.isError || status === "completed" || status === "failed") return result;
  }
  throw new Error(`task ${taskId} did not finish`);
}

async function generate(client: Client): Promise<string> {
  const generated = (await client.callTool({
    name: "generate_image",
    arguments: { prompt: "a teapot", n: 2 },
  })) as CallToolResult;
  expect(generated.isError, text(generated)).toBeFalsy();
  return (generated.structuredContent as { task_id: string }).task_id;
}

describe.each(["service", "presigned", "public"] as const)("MCP with links: %s", (links) => {
  let app: TestApp;
  beforeAll(async () => {
    const prefix = `mcp-${links}-${randomBytes(4).toString("hex")}`;
    app = await startTestApp({
      config: {
        images: {
          ...s3.imagesConfig(prefix),
          links,
          ...(links === "public" ? { publicBaseUrl: `${s3.endpoint}/${s3.bucket}` } : {}),
        },
      },
    });
  });
  afterAll(async () => {
    await app?.close();
  });

  it("over HTTP: resource links that open without a bearer, where the mode points", async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${app.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${app.key}` } },
    });
    const client = new Client({ name: "links-test", version: "1.0.0" });
    await client.connect(transport);
    try {
      const taskId = await generate(client);
      const result = await checkUntilDone(client, taskId);
      expect(result.isError, text(result)).toBeFalsy();
      const files = (result.structuredContent as { files: Array<{ url: string }> }).files;
      expect(files).toHaveLength(2);
      for (const file of files) {
        const origin = new URL(file.url).origin;
        expect(origin).toBe(links === "service" ? new URL(app.url).origin : s3.endpoint);
        const response = await fetch(file.url);
        expect(response.status).toBe(200);
        expect(response.headers.get("content-type")).toBe("image/png");
      }
    } finally {
      await client.close();
    }
  });

  it("over stdio: the images saved, byte for byte what the links serve", async () => {
    const outputDir = path.join(scratch, `out-${links}`);
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, "mcp"],
      env: { OPENAI_BASE_URL: app.baseURL, OPENAI_API_KEY: app.key, IMAGE_OUTPUT_DIR: outputDir },
      cwd: scratch,
      stderr: "pipe",
    });
    const client = new Client({ name: "links-stdio-test", version: "1.0.0" });
    await client.connect(transport);
    try {
      const taskId = await generate(client);
      const result = await checkUntilDone(client, taskId);
      expect(result.isError, text(result)).toBeFalsy();
      const files = (result.structuredContent as { files: Array<{ path: string }> }).files;
      expect(files).toHaveLength(2);
      const task = (await (
        await fetch(`${app.baseURL}/images/tasks/${taskId}`, {
          headers: { Authorization: `Bearer ${app.key}` },
        })
      ).json()) as { data: Array<{ url: string }> };
      for (const [index, file] of files.entries()) {
        const served = Buffer.from(await (await fetch(task.data[index]!.url)).arrayBuffer());
        expect((await fs.readFile(file.path)).equals(served)).toBe(true);
      }
    } finally {
      await client.close();
    }
  });
});
