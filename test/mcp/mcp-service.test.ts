import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createMcpServer } from "../../src/mcp/create-mcp-server.js";
import { createImageFileSink } from "../../src/mcp/sink/image-file-sink.js";
import { createImageTaskApiClient } from "../../src/mcp/client/image-task-api-client.js";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";
import { connectInMemory } from "./connect-in-memory.js";

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

// The tool logic in memory against the real service in front of the fake upstream.
describe("MCP tools against the running service (in memory)", () => {
  let app: TestApp;
  let scratch: string;
  let outputDir: string;
  let client: Client;
  let closeClient: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app.close();
  });
  beforeEach(async () => {
    scratch = await fs.mkdtemp(path.join(os.tmpdir(), "mcp-service-"));
    outputDir = path.join(scratch, "images");
    app.upstream.behave("images", { kind: "ok" });
    await connect(app.key);
  });
  afterEach(async () => {
    await closeClient?.();
    closeClient = undefined;
    await fs.rm(scratch, { recursive: true, force: true });
  });

  /** Every URL the MCP server's API client fetched. */
  const fetched: string[] = [];

  async function connect(key: string) {
    await closeClient?.();
    const server = createMcpServer({
      api: createImageTaskApiClient({
        baseUrl: app.baseURL,
        authorization: `Bearer ${key}`,
        credentialHint: "Check OPENAI_API_KEY in the MCP server's environment.",
        fetch: (input, init) => {
          fetched.push(String(input));
          return fetch(input, init);
        },
      }),
      delivery: { kind: "files", sink: createImageFileSink({ outputDir }) },
      pollIntervalMs: 100,
      maxPollIntervalMs: 250,
    });
    ({ client, close: closeClient } = await connectInMemory(server));
  }

  async function call(name: string, args: Record<string, unknown>) {
    return (await client.callTool({ name, arguments: args })) as CallToolResult;
  }
  const text = (r: CallToolResult) =>
    r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

  async function submit(args: Record<string, unknown> = {}): Promise<string> {
    const result = await call("generate_image", { prompt: "a lighthouse at dusk", ...args });
    expect(result.isError, text(result)).toBeFalsy();
    return (result.structuredContent as { task_id: string }).task_id;
  }

  /** Polls with short calls until the task is finished. */
  async function checkUntilDone(taskId: string): Promise<CallToolResult> {
    for (let i = 0; i < 40; i++) {
      const result = await call("check_image_task", { task_id: taskId, wait_seconds: 5 });
      const status = (result.structuredContent as { status?: string } | undefined)?.status;
      if (result.isError || status === "completed" || status === "failed") return result;
    }
    throw new Error(`task ${taskId} did not finish`);
  }

  it("generates, waits with progress, saves PNG files and repeats without writing", async () => {
    app.upstream.behave("images", { kind: "ok", delayMs: 1200 });
    const generated = await call("generate_image", { prompt: "two lighthouses", n: 2 });
    // Answered before the channel's 1.2 s answer: queued, where a tool that waited would show
    // it completed (a status, not a clock, which a loaded CI machine could push past 1.2 s).
    expect(generated.structuredContent).toMatchObject({ status: "queued", model: "gpt-image-1" });
    const taskId = (generated.structuredContent as { task_id: string }).task_id;
    expect(taskId).toMatch(/^task_[A-Za-z0-9_-]+$/);

    const progress: Array<{ progress: number; total?: number }> = [];
    const result = (await client.callTool(
      { name: "check_image_task", arguments: { task_id: taskId, wait_seconds: 20 } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    )) as CallToolResult;
    expect(result.isError, text(result)).toBeFalsy();
    expect(progress.length).toBeGreaterThan(0);
    expect(progress[0]!.total).toBe(20);

    const content = result.structuredContent as {
      status: string;
      files: Array<{ path: string; bytes: number; mime_type: string }>;
    };
    expect(content.status).toBe("completed");
    expect(content.files).toHaveLength(2);
    const realOut = await fs.realpath(outputDir);
    for (const [index, file] of content.files.entries()) {
      expect(file.path).toBe(path.join(realOut, `${taskId}-${index}.png`));
      expect(file.mime_type).toBe("image/png");
      const bytes = await fs.readFile(file.path);
      expect(bytes.subarray(0, 8)).toEqual(PNG_MAGIC);
      expect(bytes.length).toBe(file.bytes);
    }
    const serialized = JSON.stringify(result.structuredContent);
    expect(serialized).not.toMatch(/b64_json|iVBORw0KGgo/);
    expect(serialized).not.toContain(UPSTREAM_KEY);

    const before = await Promise.all(content.files.map((f) => fs.stat(f.path)));
    const upstreamCalls = app.upstream.requests.length;
    const again = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(again.isError, text(again)).toBeFalsy();
    expect((again.structuredContent as typeof content).files).toEqual(content.files);
    const after = await Promise.all(content.files.map((f) => fs.stat(f.path)));
    expect(after.map((s) => [s.ino, s.mtimeMs, s.size])).toEqual(
      before.map((s) => [s.ino, s.mtimeMs, s.size]),
    );
    expect(app.upstream.requests.length).toBe(upstreamCalls);
  });

  it("waits on the service (one GET with ?wait=) instead of polling, answered as the task ends", async () => {
    app.upstream.behave("images", { kind: "ok", delayMs: 1500 });
    const taskId = await submit();
    fetched.length = 0;
    const started = Date.now();
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 20 });
    const took = Date.now() - started;
    expect(result.isError, text(result)).toBeFalsy();
    expect((result.structuredContent as { status: string }).status).toBe("completed");
    const polls = fetched.filter((url) => url.includes(`/images/tasks/${taskId}`));
    expect(polls).toEqual([`${app.baseURL}/images/tasks/${taskId}?wait=20&links=service`]);
    // Answered when the task ended (about 1.5 s after submission), not at the 20 s limit.
    expect(took).toBeLessThan(10_000);
  });

  it("reports a failed task as a tool error with its code", async () => {
    app.upstream.behave("images", {
      kind: "status",
      status: 400,
      body: {
        error: {
          message: "Your request was rejected as a result of our safety system.",
          type: "invalid_request_error",
          param: null,
          code: "content_policy_violation",
        },
      },
    });
    const taskId = await submit();
    const result = await checkUntilDone(taskId);
    expect(result.isError).toBe(true);
    expect(text(result)).toContain("content_policy_violation");
    expect(result.structuredContent).toMatchObject({
      task_id: taskId,
      status: "failed",
      error: { code: "content_policy_violation" },
    });
    expect(text(result)).not.toContain(UPSTREAM_KEY);
    await expect(fs.readdir(outputDir)).rejects.toThrow();
  });

  it("refuses path escapes: task ids and a symlink planted at the target", async () => {
    for (const taskId of ["../x", "/etc/passwd", "task_../../etc/passwd", "..\\x"]) {
      const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
      expect(result.isError, taskId).toBe(true);
      expect(text(result)).toContain("task_id");
    }
    expect(await fs.readdir(scratch)).toEqual([]);

    const taskId = await submit();
    const victim = path.join(scratch, "victim.txt");
    await fs.writeFile(victim, "do not touch");
    await fs.mkdir(outputDir);
    const target = path.join(outputDir, `${taskId}-0.png`);
    await fs.symlink(victim, target);
    const result = await checkUntilDone(taskId);
    expect(result.isError).toBe(true);
    expect(text(result)).toContain("left untouched");
    expect(await fs.readFile(victim, "utf8")).toBe("do not touch");
    expect((await fs.lstat(target)).isSymbolicLink()).toBe(true);
  });

  it("turns a bad key and an unknown task into clear tool errors", async () => {
    const unknown = await call("check_image_task", {
      task_id: "task_0000000000000000000000",
      wait_seconds: 0,
    });
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toContain("404 task_not_found");

    const taskId = await submit();
    await connect("sk-not-a-key");
    const generated = await call("generate_image", { prompt: "x" });
    expect(generated.isError).toBe(true);
    expect(text(generated)).toContain("HTTP 401 invalid_api_key");
    expect(text(generated)).toContain("Check OPENAI_API_KEY");
    expect(text(generated)).not.toContain("sk-not-a-key");
    const checked = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(checked.isError).toBe(true);
    expect(text(checked)).toContain("401");
  });

  it("cancels a running task", async () => {
    app.upstream.behave("images", { kind: "hang" });
    const taskId = await submit();
    const cancelled = await call("cancel_image_task", { task_id: taskId });
    expect(cancelled.isError, text(cancelled)).toBeFalsy();
    expect(cancelled.structuredContent).toMatchObject({
      task_id: taskId,
      status: "failed",
      error: { code: "cancelled" },
    });
  });
});
