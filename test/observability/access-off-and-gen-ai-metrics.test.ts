import OpenAI from "openai";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY } from "../support/start-test-app.js";

describe("logging.access: false", () => {
  it("writes no access line, and still answers X-Request-Id", async () => {
    const lines: Array<{ msg?: string }> = [];
    const logger = pino(
      { level: "trace" },
      { write: (line: string) => void lines.push(JSON.parse(line)) },
    );
    const app = await startTestApp({
      logger,
      config: { logging: { level: "trace", access: false } },
    });
    onTestFinished(() => app.close());
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const { response } = await client.chat.completions
      .create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] })
      .withResponse();
    expect(response.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    await fetch(`${app.url}/healthz`);
    expect(lines.filter((line) => line.msg === "request")).toEqual([]);
  });
});

describe("GenAI client metrics", () => {
  it("count operation duration and tokens by operation and a bounded model", async () => {
    const upstream = await startFakeUpstream();
    onTestFinished(() => upstream.close());
    // A glob serves any embedding model a client names: only listed ones may be labels.
    const channels = [
      {
        name: "fake",
        baseUrl: upstream.baseUrl,
        apiKey: UPSTREAM_KEY,
        models: ["gpt-4o-mini", "text-embedding-*"],
      },
    ];
    const app = await startTestApp({ upstream, config: { channels } });
    onTestFinished(() => app.close());
    const client = new OpenAI({ apiKey: app.vipKey, baseURL: app.baseURL, maxRetries: 0 });
    await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }],
    });
    await client.embeddings.create({ model: "text-embedding-made-up", input: "x" });
    const text = await (await fetch(`${app.url}/metrics`)).text();
    const p = "image_task_sidecar_gen_ai_client";
    expect(text).toContain(
      `${p}_operation_duration_seconds_count{operation="chat",model="gpt-4o-mini"} 1`,
    );
    expect(text).toMatch(
      new RegExp(
        `${p}_token_usage_sum\\{operation="chat",model="gpt-4o-mini",token_type="input"\\} [1-9]`,
      ),
    );
    // A model no channel lists is never a label value.
    expect(text).toContain(
      `${p}_operation_duration_seconds_count{operation="embeddings",model="other"} 1`,
    );
    expect(text).not.toContain("text-embedding-made-up");
  });
});
