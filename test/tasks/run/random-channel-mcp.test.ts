import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it, onTestFinished } from "vitest";
import { expectNothingLeaked } from "../../http/error-envelope.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import { slow } from "../../support/time-factor.js";
import { PNG_MAGIC, type Target } from "../task-api.js";
import { chaosApp, each, MODELS, SEED, storyOf, TIMEOUT_SEC } from "./chaos-checks.js";
import { isControl } from "./chaos-control.js";

/*
 * MCP clients against channels that answer at random (see chaos-channel.ts): each task started
 * with `generate_image` and collected with `check_image_task` over Streamable HTTP, as an agent
 * does. Whatever the channels do, every tool call answers (never a JSON-RPC error, never a hang
 * past the task's timeout); a task ends completed, its links fetching PNGs without a bearer, or
 * failed as a tool error that says why; a cancel answers; nothing secret reaches the client or
 * the log, nothing is logged as an error. Seeded: `TEST_RANDOM_SEED` runs another mix.
 */

const TASKS = 24;

/** An MCP client on the service's `/mcp`, closed when the test ends. */
async function mcpClient(app: Target): Promise<Client> {
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
  const deadline = Date.now() + slow((TIMEOUT_SEC + 15) * 1000);
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

// On the memory store: the stores meet these channels in the other random-channel files.
describe("random channel answers: MCP tools", () => {
  it(
    `every tool call answers, every task ends (seed ${SEED})`,
    { timeout: slow(90_000) },
    async () => {
      const { channel, app, lines } = await chaosApp({ storeUrl: "memory://" });
      const client = await mcpClient(app);
      const story = (n: number) => storyOf(channel.answers, n);
      const ends = await each(TASKS, story, async (n) => {
        const started = (await client.callTool({
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
          const cancelled = (await client.callTool({
            name: "cancel_image_task",
            arguments: { task_id: taskId },
          })) as CallToolResult;
          expectNothingLeaked(JSON.stringify(cancelled));
        }
        const result = await collect(client, taskId, n);
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
      });
      // The mix must hold both ends, or the seed tests little.
      expect(ends).toContain("completed");
      expect(ends).toContain("failed");
      expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
      for (const line of lines) expect(line).not.toContain(UPSTREAM_KEY);
      const errors = lines.filter((line) => (JSON.parse(line) as { level: number }).level >= 50);
      expect(errors).toEqual([]);
    },
  );
});
