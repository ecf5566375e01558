import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { expect, onTestFinished } from "vitest";
import { expectNothingLeaked } from "../../http/error-envelope.js";
import { PNG_MAGIC, type Target } from "../task-api.js";
import { MODELS, endWithinMs } from "./chaos-checks.js";
import { isControl } from "./chaos-control.js";

// A random-channel task as an MCP client (an agent) runs it: see random-channel-mcp.test.ts.

/** An MCP client on the service's `/mcp`, closed when the test ends. */
export async function mcpClient(app: Target): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${app.url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${app.key}` } },
  });
  const client = new Client({ name: "random-channel", version: "1.0.0" });
  await client.connect(transport);
  onTestFinished(() => client.close());
  return client;
}

/** A tool result's structured content, as the tools' output schemas give it. */
const checkedOf = (result: CallToolResult) => result.structuredContent as unknown as Checked;

const textOf = (result: CallToolResult) =>
  result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

interface Checked {
  task_id: string;
  status: string;
  error?: { code: string; message: string };
  files?: Array<{ url: string; mime_type: string }>;
}

/** `check_image_task` until the task ended; each answer checked for what it must never hold. */
async function collect(client: Client, taskId: string, n: number): Promise<CallToolResult> {
  const deadline = Date.now() + endWithinMs();
  for (;;) {
    const result = (await client.callTool({
      name: "check_image_task",
      arguments: { task_id: taskId, wait_seconds: 3 },
    })) as CallToolResult;
    expectNothingLeaked(JSON.stringify(result));
    const checked = checkedOf(result) as Checked | undefined;
    if (checked?.status === "completed" || checked?.status === "failed") return result;
    // A running task's answer is no error; anything else ends the collection.
    if (result.isError) return result;
    if (Date.now() > deadline) throw new Error(`#${n}: still ${checked?.status}`);
  }
}

/** A completed task's links, fetched as an agent's host does: without a bearer, each a PNG. */
async function expectLinkedImages(result: CallToolResult): Promise<void> {
  const files = checkedOf(result).files ?? [];
  expect(files.length, textOf(result)).toBeGreaterThan(0);
  for (const file of files) {
    const response = await fetch(file.url);
    expect(response.status, file.url).toBe(200);
    expect(Buffer.from(await response.arrayBuffer()).subarray(0, 8)).toEqual(PNG_MAGIC);
  }
}

/** Where an MCP task is started (`generate_image`) and where it is collected and cancelled. */
export interface McpPlaces {
  start: Client;
  check: Client;
}

/**
 * Task `n` started with `generate_image` on `start`, every sixth cancelled and each collected
 * with `check_image_task` on `check`: every tool call answers without a secret, a task its
 * channel answered well completes, a completed one's links fetch PNGs without a bearer, a failed
 * one is the tool's error saying why. Its end status.
 */
export async function runMcpTask(
  n: number,
  { start, check }: McpPlaces,
  story: (n: number) => string,
): Promise<string> {
  const started = (await start.callTool({
    name: "generate_image",
    arguments: {
      prompt: `chaos #${n} a lighthouse`,
      model: MODELS[n % MODELS.length],
      ...(n % 4 === 0 ? { partial_images: 1 } : {}),
    },
  })) as CallToolResult;
  expectNothingLeaked(JSON.stringify(started));
  expect(started.isError, textOf(started)).toBeFalsy();
  const taskId = checkedOf(started).task_id;
  if (n % 6 === 5) {
    const cancelled = (await check.callTool({
      name: "cancel_image_task",
      arguments: { task_id: taskId },
    })) as CallToolResult;
    expectNothingLeaked(JSON.stringify(cancelled));
  }
  const result = await collect(check, taskId, n);
  const checked = checkedOf(result);
  // A task whose channel answered well completed, whatever the others' did.
  if (isControl(n) && n % 6 !== 5) expect(checked.status, story(n)).toBe("completed");
  if (checked.status === "completed") {
    expect(result.isError, textOf(result)).toBeFalsy();
    await expectLinkedImages(result);
  } else {
    // A failure is the tool's error, saying why, so no agent mistakes it for images.
    expect(result.isError, textOf(result)).toBe(true);
    expect(textOf(result), story(n)).toMatch(/\S/);
  }
  return checked.status;
}
