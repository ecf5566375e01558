import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe("MCP over Streamable HTTP at /mcp", () => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app.close();
  });

  async function connect(key: string | undefined) {
    const transport = new StreamableHTTPClientTransport(new URL(`${app.url}/mcp`), {
      requestInit: key ? { headers: { Authorization: `Bearer ${key}` } } : {},
    });
    const client = new Client({ name: "http-test", version: "1.0.0" });
    await client.connect(transport);
    return client;
  }
  const text = (r: CallToolResult) =>
    r.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");

  it("returns resource links to signed URLs that fetch without a bearer", async () => {
    app.upstream.behave("images", { kind: "ok", delayMs: 800 });
    const client = await connect(app.key);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([
        "cancel_image_task",
        "check_image_task",
        "generate_image",
      ]);
      const generated = (await client.callTool({
        name: "generate_image",
        arguments: { prompt: "a teapot", n: 2 },
      })) as CallToolResult;
      expect(generated.isError, text(generated)).toBeFalsy();
      const taskId = (generated.structuredContent as { task_id: string }).task_id;

      const progress: number[] = [];
      let result: CallToolResult | undefined;
      for (let i = 0; i < 10; i++) {
        result = (await client.callTool(
          { name: "check_image_task", arguments: { task_id: taskId, wait_seconds: 10 } },
          undefined,
          { onprogress: (p) => progress.push(p.progress) },
        )) as CallToolResult;
        if ((result.structuredContent as { status: string }).status === "completed") break;
      }
      expect(result?.isError, result && text(result)).toBeFalsy();
      expect(progress.length).toBeGreaterThan(0);
      const files = (
        result!.structuredContent as { files: Array<{ url: string; mime_type: string }> }
      ).files;
      expect(files).toHaveLength(2);
      const links = result!.content.filter((c) => c.type === "resource_link");
      expect(links.map((l) => l.uri)).toEqual(files.map((f) => f.url));
      for (const [index, file] of files.entries()) {
        expect(file.mime_type).toBe("image/png");
        expect(file.url).toContain(`/v1/images/files/${taskId}/${index}.png?`);
        expect(file.url).toMatch(/signature=/);
        expect(new URL(file.url).origin).toBe(new URL(app.url).origin);
        const response = await fetch(file.url);
        expect(response.status).toBe(200);
        expect(response.headers.get("content-type")).toMatch(/^image\/png/);
        expect(Buffer.from(await response.arrayBuffer()).subarray(0, 8)).toEqual(PNG_MAGIC);
      }
      expect(JSON.stringify(result!.structuredContent)).not.toMatch(/b64_json|iVBORw0KGgo/);
    } finally {
      await client.close();
    }
  });

  it("waits in process: one check_image_task call returns the finished task", async () => {
    app.upstream.behave("images", { kind: "ok", delayMs: 1500 });
    const client = await connect(app.key);
    try {
      const generated = (await client.callTool({
        name: "generate_image",
        arguments: { prompt: "a kettle" },
      })) as CallToolResult;
      const taskId = (generated.structuredContent as { task_id: string }).task_id;
      const metrics = async () => (await fetch(`${app.url}/metrics`)).text();
      const polls = (text: string) =>
        (
          text.match(
            /^image_task_sidecar_http_requests_total\{route="\/v1\/images\/tasks[^\n]*/gm,
          ) ?? []
        ).length;
      const before = polls(await metrics());
      const progress: number[] = [];
      const started = Date.now();
      const result = (await client.callTool(
        { name: "check_image_task", arguments: { task_id: taskId, wait_seconds: 20 } },
        undefined,
        { onprogress: (p) => progress.push(p.progress) },
      )) as CallToolResult;
      expect(result.isError, text(result)).toBeFalsy();
      expect((result.structuredContent as { status: string }).status).toBe("completed");
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(progress.length).toBeGreaterThan(0);
      // No HTTP round trip to the service's own task routes.
      expect(polls(await metrics())).toBe(before);
    } finally {
      await client.close();
    }
  });

  it("sees only the caller's own tasks", async () => {
    app.upstream.behave("images", { kind: "ok" });
    const vip = await connect(app.vipKey);
    const mine = await connect(app.key);
    try {
      const generated = (await vip.callTool({
        name: "generate_image",
        arguments: { prompt: "secret" },
      })) as CallToolResult;
      const taskId = (generated.structuredContent as { task_id: string }).task_id;
      const other = (await mine.callTool({
        name: "check_image_task",
        arguments: { task_id: taskId, wait_seconds: 0 },
      })) as CallToolResult;
      expect(other.isError).toBe(true);
      expect(text(other)).toContain("refused (task_not_found)");
    } finally {
      await vip.close();
      await mine.close();
    }
  });

  it("answers 401 without a bearer and 405 to GET and DELETE", async () => {
    const initialize = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "raw", version: "1" },
      },
    };
    const headers = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    };
    const missing = await fetch(`${app.url}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify(initialize),
    });
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe(
      "missing_api_key",
    );
    const bad = await fetch(`${app.url}/mcp`, {
      method: "POST",
      headers: { ...headers, authorization: "Bearer sk-nope" },
      body: JSON.stringify(initialize),
    });
    expect(bad.status).toBe(401);
    await expect(connect(undefined)).rejects.toThrow();

    for (const method of ["GET", "DELETE"]) {
      const response = await fetch(`${app.url}/mcp`, {
        method,
        headers: { authorization: `Bearer ${app.key}`, accept: "text/event-stream" },
      });
      expect(response.status).toBe(405);
      expect(await response.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 } });
    }
  });

  it("answers an empty batch with JSON-RPC's Invalid Request, not an empty 202", async () => {
    const response = await fetch(`${app.url}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${app.key}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: "[]",
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      jsonrpc: "2.0",
      error: { code: -32600, message: "Invalid Request: an empty batch" },
      id: null,
    });
  });
});
