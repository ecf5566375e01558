import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTestApp, TEST_KEYS, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

let app: TestApp;

beforeEach(async () => {
  app = await startTestApp();
});
afterEach(() => app.close());

describe("probes", () => {
  it("answers /healthz and /readyz without a key", async () => {
    for (const path of ["/healthz", "/readyz"]) {
      const response = await fetch(`${app.url}${path}`);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toMatch(/^application\/json/);
      await response.json();
    }
  });
});

describe("GET /metrics", () => {
  it("answers Prometheus text under one prefix, without auth, holding no key", async () => {
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }],
    });
    await client.models.list();
    await fetch(`${app.baseURL}/models`, { headers: { authorization: "Bearer sk-wrong-key" } });
    await fetch(`${app.baseURL}/models/${encodeURIComponent(TEST_KEYS.vip)}`, {
      headers: { authorization: `Bearer ${app.key}` },
    });

    const response = await fetch(`${app.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await response.text();

    const samples = text.split("\n").filter((line) => line && !line.startsWith("#"));
    expect(samples.length).toBeGreaterThan(0);
    for (const line of samples) expect(line).toMatch(/^image_task_sidecar_[a-z0-9_]+[{ ]/);
    expect(text).toMatch(/^image_task_sidecar_http_requests_total\{[^}]*status="200"/m);
    expect(text).toMatch(/^image_task_sidecar_upstream_requests_total\{[^}]*channel="fake"/m);

    expect(text).not.toContain(UPSTREAM_KEY);
    expect(text).not.toContain("sk-wrong-key");
    for (const key of Object.values(TEST_KEYS)) expect(text).not.toContain(key);
  });
});
