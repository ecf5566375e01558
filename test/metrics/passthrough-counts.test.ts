import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, TEST_KEYS, type TestApp } from "../support/start-test-app.js";

// The passthrough's counters count per series between scrapes and reach /metrics when it is
// read: every request counted once, whether it came before the first scrape or between two.
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const chat = async () => {
  const response = await fetch(`${app.baseURL}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
  });
  expect(response.status).toBe(200);
  await response.arrayBuffer();
};

/** The value of the sample whose name and labels start with `prefix`. */
async function sample(prefix: string): Promise<number | undefined> {
  const text = await (await fetch(`${app.url}/metrics`)).text();
  const line = text.split("\n").find((candidate) => candidate.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

const HTTP =
  'image_task_sidecar_http_requests_total{route="/v1/chat/completions",method="POST",status="200"}';
const UPSTREAM =
  'image_task_sidecar_upstream_requests_total{channel="fake",route="chat_completions",outcome="200"}';
/** A configured key without a name is counted by its fingerprint. */
const KEY = `key_${createHash("sha256").update(TEST_KEYS.default).digest("hex").slice(0, 12)}`;
const INPUT = `image_task_sidecar_tokens_total{channel="fake",model="gpt-4o-mini",group="default",key="${KEY}",type="input"}`;
const DURATION =
  'image_task_sidecar_http_request_duration_seconds_count{route="/v1/chat/completions",method="POST",status="200"}';

describe("passthrough counters", () => {
  it("count every request once across scrapes", async () => {
    for (let i = 0; i < 3; i += 1) await chat();
    expect(await sample(HTTP)).toBe(3);
    expect(await sample(UPSTREAM)).toBe(3);
    expect(await sample(DURATION)).toBe(3);
    const tokens = (await sample(INPUT)) as number;
    expect(tokens).toBeGreaterThan(0);

    // A scrape with nothing new counts nothing again.
    expect(await sample(HTTP)).toBe(3);
    for (let i = 0; i < 2; i += 1) await chat();
    expect(await sample(HTTP)).toBe(5);
    expect(await sample(UPSTREAM)).toBe(5);
    expect(await sample(DURATION)).toBe(5);
    expect(await sample(INPUT)).toBe((tokens / 3) * 5);
  });
});
