import { request } from "node:http";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { formatBanner } from "../../src/cli/print-banner.js";
import { defaultConsoleAssetsDir } from "../../src/console/console-assets.js";
import { imageLinkOrigins } from "../../src/console/console-headers.js";
import type { RunningServer } from "../../src/server.js";
import { parseConfig } from "../../src/config/load-config.js";
import { startS3Server } from "../support/s3-server.js";
import { testConfig } from "../support/start-test-app.js";
import { submitOk, useApp, waitForStatus } from "../tasks/task-api.js";
import { startDemoService } from "./console-browser.js";

/** A request exactly as written: `fetch` would resolve `..` in the path before sending it. */
function raw(
  url: string,
  path: string,
  options: { method?: string; headers?: Record<string, string> } = {},
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, {
      method: options.method ?? "GET",
      headers: options.headers,
    });
    req.path = path;
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () =>
        resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
  "require-trusted-types-for 'script'; trusted-types 'none'";

const BUDGET_BYTES = 200 * 1024;

describe("the web console's files", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startDemoService(10);
  });
  afterAll(() => server.close(200));

  it("are served at /console/ with a strict CSP and the security headers, no cookie", async () => {
    const redirect = await raw(server.url, "/console");
    expect(redirect.status).toBe(301);
    expect(redirect.headers.location).toBe("console/");

    const page = await fetch(`${server.url}/console/`, { redirect: "manual" });
    expect(page.status).toBe(200);
    expect(Object.fromEntries(page.headers)).toMatchObject({
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": CSP,
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "x-frame-options": "DENY",
      "cross-origin-opener-policy": "same-origin",
      "cache-control": "no-cache",
    });
    expect(page.headers.get("set-cookie")).toBeNull();
    const html = await page.text();

    // No inline script or style, no handler attribute, nothing from another origin.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i);
    expect(html).not.toMatch(/<style|\sstyle=|\son[a-z]+=/i);
    const references = [...html.matchAll(/\s(?:src|href)="([^#"][^"]*)"/g)].map((m) => m[1]!);
    expect(references.sort()).toEqual([
      "base.css",
      "icon.svg",
      "icon.svg",
      "js/console/src/main.js",
      "views.css",
    ]);
    for (const reference of references) {
      const asset = await fetch(new URL(reference, `${server.url}/console/`));
      expect(asset.status, reference).toBe(200);
      expect(asset.headers.get("content-security-policy")).toBe(CSP);
      expect(asset.headers.get("x-content-type-options")).toBe("nosniff");
    }
    const types = await Promise.all(
      ["js/console/src/main.js", "views.css", "icon.svg"].map(async (name) =>
        (await fetch(`${server.url}/console/${name}`)).headers.get("content-type"),
      ),
    );
    expect(types).toEqual([
      "text/javascript; charset=utf-8",
      "text/css; charset=utf-8",
      "image/svg+xml",
    ]);
  });

  it("are gzipped for clients that take it, and answered 304 when unchanged", async () => {
    const plain = await raw(server.url, "/console/js/console/src/main.js");
    expect(plain.headers["content-encoding"]).toBeUndefined();
    const zipped = await raw(server.url, "/console/js/console/src/main.js", {
      headers: { "accept-encoding": "br, gzip;q=0.8" },
    });
    expect(zipped.headers["content-encoding"]).toBe("gzip");
    expect(zipped.headers.vary).toBe("Accept-Encoding");
    expect(gunzipSync(zipped.body).equals(plain.body)).toBe(true);
    const refused = await raw(server.url, "/console/js/console/src/main.js", {
      headers: { "accept-encoding": "gzip;q=0" },
    });
    expect(refused.headers["content-encoding"]).toBeUndefined();

    const etag = String(plain.headers.etag);
    const again = await raw(server.url, "/console/js/console/src/main.js", {
      headers: { "if-none-match": etag },
    });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
    const head = await raw(server.url, "/console/", { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
  });

  it("are the only files below /console/: traversal, directories and sources are 404", async () => {
    for (const path of [
      "/console/../package.json",
      "/console/%2e%2e/package.json",
      "/console/..%2fpackage.json",
      "/console/js/../index.html",
      "/console//index.html",
      "/console/js/",
      "/console/js",
      "/console/src/main.ts",
      "/console/tsconfig.json",
      "/console/index.html/",
      "/console/%00",
    ]) {
      const answer = await raw(server.url, path);
      expect(answer.status, path).toBe(404);
      expect(JSON.parse(answer.body.toString()).error.code, path).toBe("not_found");
    }
    const posted = await raw(server.url, "/console/", { method: "POST" });
    expect(posted.status).toBe(404);
  });

  it("weigh at most 200 KiB gzipped together, and use no HTML sink or eval", async () => {
    const dir = defaultConsoleAssetsDir();
    const names = (await readdir(dir, { recursive: true })).filter((name) => /\.\w+$/.test(name));
    let total = 0;
    for (const name of names) {
      const bytes = await readFile(join(dir, name));
      total += gzipSync(bytes, { level: 9 }).length;
      if (name.endsWith(".js")) {
        expect(bytes.toString(), name).not.toMatch(
          /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/,
        );
      }
    }
    expect(names.length).toBeGreaterThan(5);
    expect(total).toBeLessThanOrEqual(BUDGET_BYTES);
  });
});

describe("console.enabled: false", () => {
  it("answers 404 not_found for the whole console, and the banner does not name it", async () => {
    const app = await useApp({ config: { console: { enabled: false } } });
    for (const path of ["/console", "/console/", "/console/js/console/src/main.js"]) {
      const answer = await fetch(`${app.url}${path}`, { redirect: "manual" });
      expect(answer.status, path).toBe(404);
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("not_found");
    }
    const banner = (config: typeof app.config) =>
      formatBanner({ url: "http://127.0.0.1:8080", config, demo: true, configFile: "c.yaml" });
    expect(banner(app.config)).not.toContain("/console/");
    const enabled = testConfig("http://127.0.0.1:9/v1");
    expect(banner(enabled)).toContain("Web console: http://127.0.0.1:8080/console/");
  });
});

describe("the console's img-src", () => {
  const config = (extra: Record<string, unknown>) => {
    // The file's fields again, not what parsing worked out of them.
    const { deployment: _deployment, ...fields } = testConfig("http://127.0.0.1:9/v1");
    return parseConfig({ ...fields, ...extra });
  };

  it("adds the origins image links point at: publicBaseUrl, a CDN, a bucket", () => {
    expect(imageLinkOrigins(config({}))).toEqual([]);
    expect(
      imageLinkOrigins(
        config({
          server: { port: 0, publicBaseUrl: "https://images.example.com/base" },
          images: {
            url: "s3://pics",
            links: "public",
            publicBaseUrl: "https://cdn.example.net/img",
          },
        }),
      ),
    ).toEqual(["https://images.example.com", "https://cdn.example.net"]);
    const presigned = (bucket: string, s3: Record<string, unknown>) =>
      imageLinkOrigins(config({ images: { url: `s3://${bucket}/p`, links: "presigned", s3 } }));
    expect(presigned("pics", { region: "eu-west-1" })).toEqual([
      "https://pics.s3.eu-west-1.amazonaws.com",
    ]);
    expect(presigned("my.pics", {})).toEqual(["https://s3.us-east-1.amazonaws.com"]);
    expect(
      presigned("pics", { endpoint: "https://acc.r2.cloudflarestorage.com", region: "auto" }),
    ).toEqual(["https://pics.acc.r2.cloudflarestorage.com"]);
    expect(presigned("pics", { endpoint: "http://minio:9000", forcePathStyle: true })).toEqual([
      "http://minio:9000",
    ]);
  });

  it("lets the page show a presigned link the service really hands out", async () => {
    const s3 = await startS3Server();
    onTestFinished(() => s3.close());
    const app = await useApp({
      config: { images: { ...s3.imagesConfig("console"), links: "presigned" } },
    });
    const id = await submitOk(app, { prompt: "a bucket", response_format: "url" });
    const done = await waitForStatus(app, id, ["completed"]);
    const link = new URL(done.body.data![0]!.url!);
    expect(link.searchParams.has("X-Amz-Signature")).toBe(true);
    const csp = (await fetch(`${app.url}/console/`)).headers.get("content-security-policy")!;
    const imgSrc = csp.split("; ").find((directive) => directive.startsWith("img-src "))!;
    expect(imgSrc.split(" ")).toContain(link.origin);
  });
});
