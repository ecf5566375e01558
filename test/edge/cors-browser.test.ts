import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { pino } from "pino";
import type { Browser, Page } from "playwright-core";
import { build, type Rolldown } from "vite";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { slow } from "../support/time-factor.js";
import { DEMO_KEY, launchChromium, openPage } from "../console/console-browser.js";

// A web page of another origin calling the service from Chromium, as a browser app does with a
// key of its own: the browser's own preflight, then the calls, the answers read in the page; and
// the MCP SDK's client bundled into a page, as a browser MCP client (an inspector, say) is.

/**
 * The service on its demo defaults (`npm start`), in memory, with `corsOrigins` set; the demo
 * channel's images take 300 ms.
 */
async function startService(corsOrigins: string[]): Promise<RunningServer> {
  const { config } = loadConfig({ env: { PORT: "0", STORE_URL: "memory://" } });
  config.server.corsOrigins = corsOrigins;
  config.channels = config.channels.map((channel) => ({ ...channel, imageDelayMs: 300 }));
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

/** test/edge/mcp-sdk-for-pages.ts bundled as one script, as a browser app ships the SDK. */
async function bundleMcpSdk(): Promise<string> {
  const output = (await build({
    root: resolve(import.meta.dirname, "../.."),
    configFile: false,
    logLevel: "warn",
    resolve: { conditions: ["browser"] },
    build: {
      write: false,
      minify: false,
      lib: {
        entry: resolve(import.meta.dirname, "mcp-sdk-for-pages.ts"),
        formats: ["iife"],
        name: "mcpSdkBundle",
      },
    },
  })) as Rolldown.RolldownOutput[];
  const chunk = output[0]?.output.find((file) => file.type === "chunk");
  if (!chunk || chunk.type !== "chunk") throw new Error("vite built no script");
  return chunk.code;
}

/** What the page's MCP client reports: the tools, a generated image's link and its size. */
interface McpSeen {
  ok: boolean;
  tools?: string[];
  link?: string;
  width?: number;
  error?: string;
}

/** In the page: the SDK's client connects to `/mcp`, generates an image and shows it. */
function mcpInPage(page: Page, serviceUrl: string, key: string): Promise<McpSeen> {
  return page.evaluate(
    async ({ serviceUrl, key }) => {
      type Sdk = {
        Client: new (info: { name: string; version: string }) => {
          connect(transport: unknown): Promise<void>;
          listTools(): Promise<{ tools: { name: string }[] }>;
          callTool(call: { name: string; arguments: Record<string, unknown> }): Promise<{
            isError?: boolean;
            content: { type: string; uri?: string }[];
            structuredContent?: { task_id?: string; status?: string };
          }>;
          close(): Promise<void>;
        };
        StreamableHTTPClientTransport: new (url: URL, options: unknown) => unknown;
      };
      const { Client, StreamableHTTPClientTransport } = (globalThis as { mcpSdk?: Sdk }).mcpSdk!;
      // Where the page stands, for a test that would otherwise only time out.
      const at = (step: string) => Object.assign(globalThis, { mcpStep: step });
      const client = new Client({ name: "page", version: "1.0.0" });
      try {
        at("connect");
        await client.connect(
          new StreamableHTTPClientTransport(new URL(`${serviceUrl}/mcp`), {
            requestInit: { headers: { authorization: `Bearer ${key}` } },
          }),
        );
        at("listTools");
        const tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
        at("generate_image");
        const started = await client.callTool({
          name: "generate_image",
          arguments: { prompt: "a lighthouse at dusk" },
        });
        const taskId = started.structuredContent?.task_id;
        let link: string | undefined;
        for (let i = 0; i < 20 && !link; i += 1) {
          at(`check_image_task ${i + 1} (task ${taskId})`);
          const checked = await client.callTool({
            name: "check_image_task",
            arguments: { task_id: taskId, wait_seconds: 5 },
          });
          if (checked.isError) return { ok: false, error: JSON.stringify(checked.content) };
          link = checked.content.find((part) => part.type === "resource_link")?.uri;
        }
        // The signed link shown as a page shows an image (no Authorization header, no CORS).
        type Img = { src: string; naturalWidth: number; decode(): Promise<void> };
        const img = new (globalThis as unknown as { Image: new () => Img }).Image();
        img.src = link!;
        at(`image ${link}`);
        await img.decode();
        return { ok: true, tools, link, width: img.naturalWidth };
      } catch (err) {
        return { ok: false, error: String(err) };
      } finally {
        at("close");
        await client.close().catch(() => undefined);
      }
    },
    { serviceUrl, key },
  );
}

describe("a page of another origin calling the API from a browser", () => {
  let browser: Browser;
  let pages: Server;
  let pageOrigin: string;
  beforeAll(async () => {
    const mcpSdk = await bundleMcpSdk();
    browser = await launchChromium();
    pages = createServer((req, res) => {
      if (req.url === "/mcp-sdk.js") {
        res.setHeader("content-type", "text/javascript");
        res.end(mcpSdk);
        return;
      }
      res.end('<!doctype html><title>app</title><script src="/mcp-sdk.js"></script>');
    });
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

  // Retried: once, under `npm run check`'s whole load, this page got no answer for 45 s (where,
  // it did not say then; it now does), and it passed in every run alone and beside the other
  // multi-process files. A fault of the service would fail all three tries.
  it(
    "connects the MCP SDK's client to /mcp, generates an image and shows its link",
    { retry: 2 },
    async () => {
      const service = await startService(["*"]);
      try {
        const { page, problems } = await openPage(browser);
        await page.goto(`${pageOrigin}/`);
        const stuck = new Promise<McpSeen>((resolve) => {
          const timer = setTimeout(
            () =>
              void page
                .evaluate("globalThis.mcpStep")
                .then((step) => resolve({ ok: false, error: `no answer at ${String(step)}` }))
                .catch((err: unknown) =>
                  resolve({ ok: false, error: `no answer: ${String(err)}` }),
                ),
            slow(25_000),
          );
          onTestFinished(() => clearTimeout(timer));
        });
        const seen = await Promise.race([mcpInPage(page, service.url, DEMO_KEY), stuck]);
        expect(seen.error).toBeUndefined();
        expect(seen.tools).toEqual(["cancel_image_task", "check_image_task", "generate_image"]);
        expect(seen.link).toMatch(new RegExp(`^${service.url}/`));
        expect(seen.width).toBeGreaterThan(0);
        // The SDK also asks for a stream of the server's own messages (GET /mcp), which this
        // server does not offer: 405, as MCP's transport says; the client goes on without it.
        expect(problems.filter((problem) => !problem.includes("405"))).toEqual([]);
      } finally {
        await service.close();
      }
    },
  );

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
