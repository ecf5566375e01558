import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult, Progress } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createMcpServer } from "../../src/mcp/create-mcp-server.js";
import { createImageFileSink } from "../../src/mcp/sink/image-file-sink.js";
import { createImageTaskApiClient } from "../../src/mcp/client/image-task-api-client.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";
import { flatPng, scriptImageStream } from "../tasks/scripted-image-stream.js";
import { connectInMemory } from "./connect-in-memory.js";

// check_image_task's progress notifications follow the task's own events (started, each
// partial image, done), over both transports: the API client over HTTP (stdio's) and /mcp.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const text = (r: CallToolResult) =>
  r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

async function overHttpApi(): Promise<Client> {
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), "mcp-progress-"));
  const server = createMcpServer({
    api: createImageTaskApiClient({
      baseUrl: app.baseURL,
      authorization: `Bearer ${app.key}`,
      credentialHint: "Check OPENAI_API_KEY.",
    }),
    delivery: { kind: "files", sink: createImageFileSink({ outputDir: scratch }) },
    progressIntervalMs: 60_000,
  });
  const { client, close } = await connectInMemory(server);
  onTestFinished(async () => {
    await close();
    await fs.rm(scratch, { recursive: true, force: true });
  });
  return client;
}

async function overMcpRoute(): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${app.url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${app.key}` } },
  });
  const client = new Client({ name: "progress-test", version: "1.0.0" });
  await client.connect(transport);
  onTestFinished(() => client.close());
  return client;
}

describe.each([
  { name: "the HTTP API client (stdio)", connect: overHttpApi },
  { name: "/mcp (in process)", connect: overMcpRoute },
])("check_image_task progress over $name", ({ connect }) => {
  it("notifies when the task starts and when it is done, rising, within one call", async () => {
    app.upstream.behave("images", { kind: "ok", delayMs: 700 });
    const client = await connect();
    const generated = (await client.callTool({
      name: "generate_image",
      arguments: { prompt: "a windmill" },
    })) as CallToolResult;
    expect(generated.isError, text(generated)).toBeFalsy();
    const taskId = (generated.structuredContent as { task_id: string }).task_id;

    const progress: Progress[] = [];
    const result = (await client.callTool(
      { name: "check_image_task", arguments: { task_id: taskId, wait_seconds: 20 } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    )) as CallToolResult;
    expect(result.isError, text(result)).toBeFalsy();
    expect((result.structuredContent as { status: string }).status).toBe("completed");

    const messages = progress.map((p) => p.message);
    expect(messages).toContain(`Task ${taskId} started`);
    expect(messages.at(-1)).toBe(`Task ${taskId} is completed`);
    expect(messages.indexOf(`Task ${taskId} started`)).toBeLessThan(messages.length - 1);
    const values = progress.map((p) => p.progress);
    expect(values).toEqual([...new Set(values)].sort((a, b) => a - b));
    expect(progress.every((p) => p.total === 20)).toBe(true);
  });

  it("notifies each partial image with its link as the channel sends it", async () => {
    const channel = scriptImageStream(app.upstream);
    const client = await connect();
    const generated = (await client.callTool({
      name: "generate_image",
      arguments: { prompt: "a harbour", partial_images: 2 },
    })) as CallToolResult;
    expect(generated.isError, text(generated)).toBeFalsy();
    const taskId = (generated.structuredContent as { task_id: string }).task_id;
    const progress: Progress[] = [];
    const checking = client.callTool(
      { name: "check_image_task", arguments: { task_id: taskId, wait_seconds: 20 } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    );
    const request = await channel.next();
    expect(request.body).toMatchObject({ stream: true, partial_images: 2 });
    const seen = async (message: RegExp) => {
      const deadline = Date.now() + 10_000;
      while (!progress.some((p) => message.test(p.message ?? ""))) {
        if (Date.now() > deadline) throw new Error(`no ${message}: ${JSON.stringify(progress)}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return progress.find((p) => message.test(p.message ?? ""))!.message!;
    };
    await seen(/started$/);
    request.partial(0, 60);
    const first = await seen(/partial image 1 is ready/);
    const link = /\((http[^)]+)\)$/.exec(first)![1]!;
    expect(Buffer.from(await (await fetch(link)).arrayBuffer()).equals(flatPng(60))).toBe(true);
    request.partial(1, 120);
    await seen(/partial image 2 is ready \(http/);
    request.complete();
    const result = (await checking) as CallToolResult;
    expect((result.structuredContent as { status: string }).status).toBe("completed");
    expect(progress.at(-1)?.message).toBe(`Task ${taskId} is completed`);
  });

  it("notifies a cancel as the task's failure", async () => {
    app.upstream.behave("images", { kind: "hang" });
    const client = await connect();
    const generated = (await client.callTool({
      name: "generate_image",
      arguments: { prompt: "never drawn" },
    })) as CallToolResult;
    const taskId = (generated.structuredContent as { task_id: string }).task_id;
    const progress: Progress[] = [];
    const checking = client.callTool(
      { name: "check_image_task", arguments: { task_id: taskId, wait_seconds: 20 } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    );
    const deadline = Date.now() + 10_000;
    while (!progress.some((p) => p.message === `Task ${taskId} started`)) {
      if (Date.now() > deadline) throw new Error(`no start: ${JSON.stringify(progress)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await client.callTool({ name: "cancel_image_task", arguments: { task_id: taskId } });
    const result = (await checking) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(progress.at(-1)?.message).toBe(`Task ${taskId} failed (cancelled)`);
  });
});
