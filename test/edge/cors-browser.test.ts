import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { DEMO_KEY, launchChromium, openPage } from "../console/console-browser.js";

// A web page of another origin calling the service from Chromium, as a browser app does with a
// key of its own: the browser's own preflight, then the calls, the answers read in the page.

/** The service on its demo defaults (`npm start`), in memory, with `corsOrigins` set. */
async function startService(corsOrigins: string[]): Promise<RunningServer> {
  const { config } = loadConfig({ env: { PORT: "0", STORE_URL: "memory://" } });
  config.server.corsOrigins = corsOrigins;
  return startServer({ config, logger: pino({ level: "silent" }), defaultMetrics: false });
}

/** What the page's script reports of a call to the service. */
interface Seen {
  ok: boolean;
  status?: number;
  requestId?: string | null;
  body?: unknown;
  events?: number;
  error?: string;
}

/** Runs `fetch(url, init)` in the page and reads the answer as the page can. */
function fetchInPage(
  page: Page,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; stream?: boolean },
): Promise<Seen> {
  return page.evaluate(
    async ({ url, init }) => {
      try {
        const response = await fetch(url, init);
        const requestId = response.headers.get("x-request-id");
        if (!init.stream) {
          return { ok: true, status: response.status, requestId, body: await response.json() };
        }
        const text = await response.text();
        const events = text.split("\n\n").filter((event) => event.startsWith("data: {")).length;
        return { ok: true, status: response.status, requestId, events };
      } catch (err) {
        return { ok: false, error: String(err) };
      }
    },
    { url, init },
  );
}

const CHAT = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] });
const SDK_HEADERS = {
  authorization: `Bearer ${DEMO_KEY}`,
  "content-type": "application/json",
  // The openai SDK's own headers in a browser: not a "simple" request, so the browser asks first.
  "x-stainless-lang": "js",
  "x-stainless-os": "Unknown",
};

describe("a page of another origin calling the API from a browser", () => {
  let browser: Browser;
  let pages: Server;
  let pageOrigin: string;
  beforeAll(async () => {
    browser = await launchChromium();
    pages = createServer((_req, res) => res.end("<!doctype html><title>app</title>"));
    await new Promise<void>((resolve) => pages.listen(0, "127.0.0.1", resolve));
    pageOrigin = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => pages?.close(resolve));
  });

  it("chats, streams and reads errors with the default corsOrigins", async () => {
    const service = await startService(["*"]);
    try {
      const { page, problems } = await openPage(browser);
      await page.goto(`${pageOrigin}/`);
      const url = `${service.url}/v1/chat/completions`;

      const plain = await fetchInPage(page, url, {
        method: "POST",
        headers: SDK_HEADERS,
        body: CHAT,
      });
      expect(plain).toMatchObject({ ok: true, status: 200, body: { object: "chat.completion" } });
      // A header of the answer beyond the simple ones: exposed.
      expect(plain.requestId).toMatch(/^[0-9a-f-]{36}$/);

      const streamed = await fetchInPage(page, url, {
        method: "POST",
        headers: SDK_HEADERS,
        body: CHAT.replace("}]", '}],"stream":true'),
        stream: true,
      });
      expect(streamed).toMatchObject({ ok: true, status: 200 });
      expect(streamed.events).toBeGreaterThan(1);

      const refused = await fetchInPage(page, url, {
        method: "POST",
        headers: { ...SDK_HEADERS, authorization: "Bearer sk-not-a-key-0000" },
        body: CHAT,
      });
      expect(refused).toMatchObject({
        ok: true,
        status: 401,
        body: { error: { code: "invalid_api_key" } },
      });
      expect(problems.filter((problem) => !problem.includes("401"))).toEqual([]);
    } finally {
      await service.close();
    }
  });

  it("is refused by the browser when the page's origin is not listed", async () => {
    const service = await startService(["https://app.example.com"]);
    try {
      const { page } = await openPage(browser);
      await page.goto(`${pageOrigin}/`);
      const seen = await fetchInPage(page, `${service.url}/v1/chat/completions`, {
        method: "POST",
        headers: SDK_HEADERS,
        body: CHAT,
      });
      expect(seen).toMatchObject({ ok: false, error: "TypeError: Failed to fetch" });
    } finally {
      await service.close();
    }
  });
});
