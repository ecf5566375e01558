import { request } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

let app: TestApp | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

interface Answer {
  status: number;
  body: string;
  /** Seconds from the last byte sent to the answer. */
  afterSilence: number;
}

/**
 * Sends headers and `parts` of a body (one every `gapMs`), then either ends it
 * (`end`) or goes silent; resolves what the service answers.
 */
function send(
  url: string,
  headers: Record<string, string>,
  parts: string[],
  options: { gapMs?: number; end?: boolean } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let lastSent = performance.now();
    const total = parts.reduce((sum, part) => sum + Buffer.byteLength(part), 0);
    const req = request(url, {
      method: "POST",
      headers: {
        authorization: `Bearer ${app!.key}`,
        // A silent body promises more than it sends; a moving one says exactly what it sends.
        "content-length": String(options.end ? total : total + 100_000),
        ...headers,
      },
    });
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          body: text,
          afterSilence: (performance.now() - lastSent) / 1000,
        }),
      );
    });
    req.on("error", reject);
    void (async () => {
      for (const [index, part] of parts.entries()) {
        if (index > 0) await new Promise((r) => setTimeout(r, options.gapMs ?? 0));
        req.write(part);
        lastSent = performance.now();
      }
      if (options.end) req.end();
    })();
  });
}

const JSON_TYPE = { "content-type": "application/json" };
const BOUNDARY = "idle0boundary";
const FORM_TYPE = { "content-type": `multipart/form-data; boundary=${BOUNDARY}` };
const formPart = (name: string, value: string, filename?: string) =>
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"` +
  `${filename ? `; filename="${filename}"\r\nContent-Type: image/png` : ""}\r\n\r\n${value}\r\n`;

describe("a body that stops arriving", () => {
  it("is cut after server.bodyIdleSec with 408 request_timeout on every route that reads a body, long before bodyTimeoutSec", async () => {
    app = await startTestApp({
      config: { server: { port: 0, host: "127.0.0.1", bodyTimeoutSec: 120, bodyIdleSec: 1 } },
    });
    const v1 = app.baseURL;
    const answers = await Promise.all([
      // Passthrough JSON, a passthrough form before its model and after it (being streamed on).
      send(`${v1}/chat/completions`, JSON_TYPE, ['{"model":']),
      send(`${v1}/audio/transcriptions`, FORM_TYPE, [formPart("file", "abc", "a.mp3")]),
      send(`${v1}/audio/transcriptions`, FORM_TYPE, [
        formPart("model", "gpt-4o-mini"),
        `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.mp3"\r\n\r\nab`,
      ]),
      // Task submissions, edit tasks as JSON and as a form, MCP over HTTP.
      send(`${v1}/images/tasks`, JSON_TYPE, ['{"model":"gpt-image-1",']),
      send(`${v1}/images/edits/tasks`, JSON_TYPE, ['{"model":"gpt-image-1","images":[']),
      send(`${v1}/images/edits/tasks`, FORM_TYPE, [formPart("model", "gpt-image-1")]),
      send(`${app.url}/mcp`, { ...JSON_TYPE, accept: "application/json, text/event-stream" }, [
        '{"jsonrpc":"2.0",',
      ]),
    ]);
    for (const answer of answers) {
      expect(answer.status, answer.body).toBe(408);
      expect(JSON.parse(answer.body)).toMatchObject({
        error: { code: "request_timeout", message: "The request body sent nothing for 1 s." },
      });
      // Cut for its silence (1 s, checked every 250 ms), not at bodyTimeoutSec.
      expect(answer.afterSilence).toBeGreaterThanOrEqual(0.9);
      expect(answer.afterSilence).toBeLessThan(10);
    }
  });

  it("lets a slow but moving upload through, however long it takes in all", async () => {
    app = await startTestApp({
      config: { server: { port: 0, host: "127.0.0.1", bodyTimeoutSec: 120, bodyIdleSec: 1 } },
    });
    const body = JSON.stringify({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "slowly" }],
    });
    // Eight pieces 600 ms apart: 4 s in all, never 1 s silent.
    const pieces = body.match(/[\s\S]{1,8}/g)!;
    const step = Math.ceil(pieces.length / 8);
    const parts = Array.from({ length: 8 }, (_, i) =>
      pieces.slice(i * step, (i + 1) * step).join(""),
    ).filter((part) => part.length > 0);
    const answer = await send(`${app.baseURL}/chat/completions`, JSON_TYPE, parts, {
      gapMs: 600,
      end: true,
    });
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ object: "chat.completion" });
  });
});
