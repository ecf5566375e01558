import { slow } from "../support/time-factor.js";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { expectError } from "../http/error-envelope.js";
import { startTestApp } from "../support/start-test-app.js";

// /metrics can be kept off the API port and behind a bearer token.

const TOKEN = "metrics-token-0123456789";

async function appWith(metrics: Record<string, unknown>) {
  const app = await startTestApp({ config: { metrics } });
  onTestFinished(() => app.close());
  return app;
}

describe("metrics.bearerToken", () => {
  it("answers 401 without the token or with another, and the text with it", async () => {
    const app = await appWith({ bearerToken: TOKEN });
    const missing = await fetch(`${app.url}/metrics`);
    expect(missing.headers.get("www-authenticate")).toMatch(/^Bearer/);
    await expectError(missing, 401, "missing_api_key");
    for (const authorization of [`Bearer ${TOKEN}x`, `Bearer ${app.key}`, `Basic ${TOKEN}`]) {
      await expectError(
        await fetch(`${app.url}/metrics`, { headers: { authorization } }),
        401,
        "invalid_api_key",
      );
    }
    const ok = await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await ok.text()).toContain("image_task_sidecar_http_requests_total");
  });

  it("refuses every scrape when the token is set but empty (an unset ${VAR})", async () => {
    const app = await appWith({ bearerToken: "" });
    await expectError(await fetch(`${app.url}/metrics`), 401, "missing_api_key");
    for (const authorization of ["Bearer ", "Bearer x"]) {
      await expectError(
        await fetch(`${app.url}/metrics`, { headers: { authorization } }),
        401,
        "invalid_api_key",
      );
    }
  });
});

describe("metrics.port", () => {
  it("serves /metrics on its own listener and no longer on the main port", async () => {
    const app = await appWith({ port: 0, host: "127.0.0.1" });
    expect(app.server.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(app.server.metricsUrl).not.toBe(app.url);
    await expectError(await fetch(`${app.url}/metrics`), 404, "not_found");
    const scraped = await fetch(`${app.server.metricsUrl}/metrics`);
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain("image_task_sidecar_task_queue_depth");
    // Nothing else is on the metrics port: not the API, not health.
    for (const path of ["/v1/models", "/healthz", "/metrics/x"]) {
      await expectError(
        await fetch(`${app.server.metricsUrl}${path}`, {
          headers: { authorization: `Bearer ${app.key}` },
        }),
        404,
        "not_found",
      );
    }
  });

  it("closes the metrics listener with the service", async () => {
    const app = await startTestApp({ config: { metrics: { port: 0 } } });
    const url = `${app.server.metricsUrl}/metrics`;
    expect((await fetch(url)).status).toBe(200);
    await app.close();
    await expect(fetch(url)).rejects.toThrow();
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

describe("a real Prometheus", () => {
  it(
    "scrapes the separate port with the bearer token, and is refused without it",
    async () => {
      if (spawnSync("prometheus", ["--version"]).error) {
        throw new Error("prometheus is not installed: `apt-get install prometheus` (.ci/run does)");
      }
      const app = await appWith({ port: 0, host: "127.0.0.1", bearerToken: TOKEN });
      const target = new URL(app.server.metricsUrl!).host;
      const dir = mkdtempSync(join(tmpdir(), "sidecar-prom-auth-"));
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
      writeFileSync(
        join(dir, "prometheus.yml"),
        [
          "global: { scrape_interval: 1s }",
          "scrape_configs:",
          "  - job_name: with-token",
          `    authorization: { credentials: "${TOKEN}" }`,
          `    static_configs: [{ targets: ["${target}"] }]`,
          "  - job_name: without-token",
          `    static_configs: [{ targets: ["${target}"] }]`,
          "",
        ].join("\n"),
      );
      const port = await freePort();
      const prometheus = spawn(
        "prometheus",
        [
          `--config.file=${join(dir, "prometheus.yml")}`,
          `--storage.tsdb.path=${join(dir, "data")}`,
          `--web.listen-address=127.0.0.1:${port}`,
        ],
        { stdio: "ignore" },
      );
      onTestFinished(() => void prometheus.kill("SIGKILL"));

      const up = async (): Promise<Record<string, string>> => {
        const response = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=up`);
        const body = (await response.json()) as {
          data: { result: Array<{ metric: { job: string }; value: [number, string] }> };
        };
        return Object.fromEntries(body.data.result.map((r) => [r.metric.job, r.value[1]]));
      };
      let last: Record<string, string> = {};
      for (let i = 0; i < 300; i += 1) {
        try {
          last = await up();
          if (last["with-token"] && last["without-token"]) break;
        } catch {
          // not listening yet
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(last).toEqual({ "with-token": "1", "without-token": "0" });
    },
    slow(60_000),
  );
});
