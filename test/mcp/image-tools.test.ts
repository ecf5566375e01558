import { promises as fs } from "node:fs";
import path from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { TINY_PNG } from "./fake-image-task-api.js";
import {
  PNG_MAGIC,
  api,
  call,
  client,
  closeClient,
  connect,
  outputDir,
  scratch,
  submit,
  text,
  useImageTools,
} from "./image-tools.js";

useImageTools();

describe("MCP image tools (in memory, fake API)", () => {
  it("lists the three tools with input and output schemas", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      "cancel_image_task",
      "check_image_task",
      "generate_image",
    ]);
    const check = tools.find((t) => t.name === "check_image_task")!;
    expect(check.inputSchema.properties).toHaveProperty("wait_seconds");
    expect(check.inputSchema.required).toEqual(["task_id"]);
    expect(check.outputSchema?.properties).toHaveProperty("files");
  });

  it("submits with the default model and response_format url, returning at once", async () => {
    const result = await call("generate_image", { prompt: "a red square", size: "1024x1024" });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      status: "queued",
      model: "gpt-image-1",
      created: 1700000000,
    });
    const taskId = (result.structuredContent as { task_id: string }).task_id;
    expect(taskId).toMatch(/^task_/);
    expect(text(result)).toContain(taskId);
  });

  it("waits with progress notifications, saves the PNG and repeats without writing", async () => {
    api.plan({ pendingPolls: 3, outcome: { kind: "completed", n: 2 } });
    const taskId = await submit({ n: 2 });
    const progress: Array<{ progress: number; total?: number; message?: string }> = [];
    const result = (await client.callTool(
      { name: "check_image_task", arguments: { task_id: taskId, wait_seconds: 10 } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    )) as CallToolResult;
    expect(result.isError, text(result)).toBeFalsy();
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress[0]).toMatchObject({ total: 10 });
    expect(progress.map((p) => p.progress)).toEqual(
      [...progress.map((p) => p.progress)].sort((a, b) => a - b),
    );

    const content = result.structuredContent as {
      status: string;
      files: Array<{ path: string; bytes: number; mime_type: string }>;
    };
    expect(content.status).toBe("completed");
    const realOut = await fs.realpath(outputDir);
    expect(content.files).toEqual([
      {
        path: path.join(realOut, `${taskId}-0.png`),
        bytes: TINY_PNG.length,
        mime_type: "image/png",
      },
      {
        path: path.join(realOut, `${taskId}-1.png`),
        bytes: TINY_PNG.length,
        mime_type: "image/png",
      },
    ]);
    for (const file of content.files) {
      const bytes = await fs.readFile(file.path);
      expect(bytes.subarray(0, 8)).toEqual(PNG_MAGIC);
    }
    expect(JSON.stringify(result.structuredContent)).not.toContain(
      TINY_PNG.toString("base64").slice(0, 20),
    );
    expect(api.downloadAuth.slice(-2)).toEqual([undefined, undefined]);

    const downloads = api.counts.download;
    const before = await Promise.all(content.files.map((f) => fs.stat(f.path)));
    const again = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(again.isError).toBeFalsy();
    expect((again.structuredContent as typeof content).files).toEqual(content.files);
    expect(api.counts.download).toBe(downloads);
    const after = await Promise.all(content.files.map((f) => fs.stat(f.path)));
    expect(after.map((s) => [s.ino, s.mtimeMs])).toEqual(before.map((s) => [s.ino, s.mtimeMs]));
    // Only the images and the hidden manifest: no temporary files left behind.
    const names = (await fs.readdir(outputDir)).sort();
    expect(names).toEqual([`.${taskId}.manifest.json`, `${taskId}-0.png`, `${taskId}-1.png`]);
  });

  it("answers an unfinished task with its status, not an error", async () => {
    api.plan({ pendingPolls: 100, outcome: { kind: "completed" } });
    const taskId = await submit();
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ task_id: taskId, status: "queued" });
    expect(text(result)).toContain("check_image_task again");
    expect(await fs.readdir(scratch)).toEqual([]);
  });

  it("turns a failed task into a tool error with its code and message", async () => {
    api.plan({
      pendingPolls: 0,
      outcome: {
        kind: "failed",
        code: "content_policy_violation",
        message: "Rejected by the safety system.",
      },
    });
    const taskId = await submit();
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(result.isError).toBe(true);
    expect(text(result)).toContain("content_policy_violation");
    expect(text(result)).toContain("Rejected by the safety system.");
    expect(result.structuredContent).toMatchObject({
      status: "failed",
      error: { code: "content_policy_violation" },
    });
  });

  it("saves b64_json items too, without putting base64 in structuredContent", async () => {
    api.plan({ pendingPolls: 0, outcome: { kind: "b64" } });
    const taskId = await submit();
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(result.isError, text(result)).toBeFalsy();
    const files = (result.structuredContent as { files: Array<{ path: string }> }).files;
    expect((await fs.readFile(files[0]!.path)).subarray(0, 8)).toEqual(PNG_MAGIC);
    expect(JSON.stringify(result)).not.toContain(TINY_PNG.toString("base64"));
  });

  it.each([
    ["../x"],
    ["/etc/passwd"],
    ["task_../../etc/passwd"],
    ["task_a000000000000000000000/../../b"],
    ["task_\u0000"],
    [""],
  ])("refuses the task id %j without calling the API or writing", async (taskId) => {
    const gets = api.counts.get;
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/task_id/);
    expect(api.counts.get).toBe(gets);
    expect(await fs.readdir(scratch)).toEqual([]);
  });

  it("returns files saved earlier after the task expired on the service", async () => {
    api.plan({ pendingPolls: 0, outcome: { kind: "completed" } });
    const taskId = await submit();
    const first = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(first.isError).toBeFalsy();
    api.tasks.delete(taskId);
    const later = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(later.isError, text(later)).toBeFalsy();
    expect((later.structuredContent as { files: unknown[] }).files).toEqual(
      (first.structuredContent as { files: unknown[] }).files,
    );
    expect(text(later)).toContain("expired");
  });

  it("turns API errors into clear tool errors", async () => {
    const unknown = await call("check_image_task", {
      task_id: "task_doesnotexist0000000000",
      wait_seconds: 0,
    });
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toContain("HTTP 404 task_not_found");

    api.failSubmissions({ status: 429, code: "queue_full", retryAfter: "7" });
    const full = await call("generate_image", { prompt: "x" });
    expect(full.isError).toBe(true);
    expect(text(full)).toContain("HTTP 429 queue_full");
    expect(text(full)).toContain("about 7 s");

    await closeClient();
    await connect({ key: "sk-wrong" });
    const bad = await call("generate_image", { prompt: "x" });
    expect(bad.isError).toBe(true);
    expect(text(bad)).toContain("HTTP 401 invalid_api_key");
    expect(text(bad)).toContain("Check OPENAI_API_KEY");
    expect(text(bad)).not.toContain("sk-wrong");

    await closeClient();
    await connect({ baseURL: "http://127.0.0.1:1/v1" });
    const down = await call("check_image_task", {
      task_id: "task_abc0000000000000000000",
      wait_seconds: 0,
    });
    expect(down.isError).toBe(true);
    expect(text(down)).toContain("Could not reach the image service at http://127.0.0.1:1/v1");
  });

  it("cancels a running task and reports a finished one as it is", async () => {
    api.plan({ pendingPolls: 100, outcome: { kind: "completed" } });
    const taskId = await submit();
    const cancelled = await call("cancel_image_task", { task_id: taskId });
    expect(cancelled.isError, text(cancelled)).toBeFalsy();
    expect(cancelled.structuredContent).toMatchObject({
      task_id: taskId,
      status: "failed",
      error: { code: "cancelled" },
    });
    const check = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(check.isError).toBe(true);
    expect(text(check)).toContain("cancelled");

    const bad = await call("cancel_image_task", { task_id: "../etc" });
    expect(bad.isError).toBe(true);
  });

  it("hands out resource links instead of files in links mode", async () => {
    await closeClient();
    await connect({ delivery: "links" });
    api.plan({ pendingPolls: 0, outcome: { kind: "completed", n: 2 } });
    const taskId = await submit();
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(result.isError, text(result)).toBeFalsy();
    const files = (result.structuredContent as { files: Array<{ url: string; mime_type: string }> })
      .files;
    expect(files).toHaveLength(2);
    expect(files[0]).toEqual({
      url: `${api.origin}/v1/images/files/${taskId}/0.png?expires=9999999999&signature=abc`,
      mime_type: "image/png",
    });
    const links = result.content.filter((c) => c.type === "resource_link");
    expect(links).toEqual([
      expect.objectContaining({
        uri: files[0]!.url,
        name: `${taskId}-0.png`,
        mimeType: "image/png",
      }),
      expect.objectContaining({ uri: files[1]!.url, name: `${taskId}-1.png` }),
    ]);
    expect(await fs.readdir(scratch)).toEqual([]);
  });

  it("moves links signed on the loopback origin to the origin the client used", async () => {
    await closeClient();
    await connect({ delivery: "links", publicOrigin: "https://images.example.com" });
    api.plan({ pendingPolls: 0, outcome: { kind: "completed" } });
    const taskId = await submit();
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    const files = (result.structuredContent as { files: Array<{ url: string }> }).files;
    expect(files[0]!.url).toBe(
      `https://images.example.com/v1/images/files/${taskId}/0.png?expires=9999999999&signature=abc`,
    );

    // A URL on another origin (the service's publicBaseUrl) is left as it is.
    api.plan({
      pendingPolls: 0,
      outcome: {
        kind: "completed",
        url: (id) => `https://cdn.example.net/v1/images/files/${id}/0.png`,
      },
    });
    const other = await submit();
    const second = await call("check_image_task", { task_id: other, wait_seconds: 0 });
    expect((second.structuredContent as { files: Array<{ url: string }> }).files[0]!.url).toBe(
      `https://cdn.example.net/v1/images/files/${other}/0.png`,
    );
  });
});
