#!/usr/bin/env node
// Draws the panels of grafana/image-task-sidecar.json from their own queries against a real
// Prometheus scraping the service, and saves them as a PNG (docs/images/grafana-dashboard.png):
// the picture in docs/operations.md. Not a Grafana screenshot (no Grafana server can be
// installed here): the same queries, the same layout, drawn with uPlot in headless Chromium.
//
// Not part of the product or of CI. It needs, besides the repository's dependencies:
//   apt-get install chromium prometheus
//   npm install --no-save playwright-core uplot
//   npm run build
// then:
//   node scripts/render-dashboard.mjs [--seconds 150] [--out docs/images/grafana-dashboard.png]
// (uplot elsewhere: --uplot-dir <its dist>, e.g. after `npm install --prefix /tmp/deps uplot`.)
//
// It starts the service on the demo defaults (memory store, webhooks to a local receiver that
// fails one attempt in four), Prometheus scraping it every second, and a little load for
// --seconds: chat (plain and streamed), Responses, bad keys, unknown routes, bursts of image
// tasks (some failing, half with partial images watched on their event streams), polls that
// wait, synchronous image calls. Prometheus labels the target with a pod name, as the Prometheus
// operator does. Then it runs every panel's queries over that window.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { page } from "./render-dashboard-page.mjs";

const ROOT = resolve(import.meta.dirname, "..");
const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "150" },
    out: { type: "string", default: join(ROOT, "docs/images/grafana-dashboard.png") },
    "uplot-dir": { type: "string", default: join(ROOT, "node_modules/uplot/dist") },
  },
});
const LOAD_MS = Number(values.seconds) * 1000;
/** What Grafana's `$__rate_interval` stands for here: a few scrapes' worth, smoothed. */
const RATE_INTERVAL = "15s";
const STEP_SEC = 2;
/** The pod name the Replicas row shows, as the Prometheus operator would label the target. */
const POD = "image-task-sidecar-7d9f8-x2k4q";

async function need(name, hint) {
  try {
    return await import(name);
  } catch {
    console.error(`${name} is missing: ${hint}`);
    process.exit(2);
  }
}

const { chromium } = await need("playwright-core", "npm install --no-save playwright-core uplot");
const uplotDir = resolve(values["uplot-dir"]);
await need(join(uplotDir, "uPlot.esm.js"), "npm install --no-save playwright-core uplot");
const { loadConfig } = await import(join(ROOT, "dist/config/load-config.js"));
const { startServer } = await import(join(ROOT, "dist/server.js"));
const { pino } = await import("pino");

const dashboard = JSON.parse(readFileSync(join(ROOT, "grafana/image-task-sidecar.json"), "utf8"));
const work = mkdtempSync(join(tmpdir(), "render-dashboard-"));
const stops = [];
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

function listen(server) {
  return new Promise((done) => server.listen(0, "127.0.0.1", () => done(server.address().port)));
}

/** A webhook receiver that fails one attempt in four, a little slowly. */
async function startReceiver() {
  let count = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () =>
      setTimeout(() => res.writeHead(++count % 4 === 0 ? 500 : 204).end(), 20 + Math.random() * 80),
    );
  });
  const port = await listen(server);
  stops.push(() => new Promise((done) => server.close(done)));
  return `http://127.0.0.1:${port}/hook`;
}

async function startService() {
  const { config } = loadConfig({
    env: { PORT: "0", STORE_URL: "memory://", IMAGES_URL: `file://${join(work, "images")}` },
  });
  config.channels = config.channels.map((channel) => ({ ...channel, imageDelayMs: 2000 }));
  config.webhooks = {
    ...config.webhooks,
    secret: `whsec_${Buffer.alloc(32, 1).toString("base64")}`,
    allowPrivateNetworks: true,
    retryScheduleSec: [2, 4],
    maxAttempts: 3,
  };
  const server = await startServer({ config, logger: pino({ level: "silent" }) });
  stops.push(() => server.close(500));
  return { url: server.url, key: config.auth.keys[0].key };
}

async function startPrometheus(target) {
  // A free port for Prometheus: the OS picks one, the probe gives it back.
  const probe = createServer();
  const promPort = await listen(probe);
  await new Promise((done) => probe.close(done));
  writeFileSync(
    join(work, "prometheus.yml"),
    [
      "global: { scrape_interval: 1s, evaluation_interval: 1s }",
      "scrape_configs:",
      "  - job_name: image-task-sidecar",
      `    static_configs: [{ targets: ["${target}"], labels: { pod: "${POD}" } }]`,
      "",
    ].join("\n"),
  );
  const child = spawn(
    "prometheus",
    [
      `--config.file=${join(work, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(work, "data")}`,
      `--web.listen-address=127.0.0.1:${promPort}`,
    ],
    { stdio: "ignore" },
  );
  stops.push(async () => child.kill("SIGKILL"));
  const url = `http://127.0.0.1:${promPort}`;
  for (let i = 0; i < 100; i += 1) {
    try {
      if ((await fetch(`${url}/-/ready`)).ok) return url;
    } catch {
      // not yet
    }
    await sleep(200);
  }
  throw new Error("prometheus did not start");
}

/** A little of everything a user does, for `ms`. */
async function load({ url, key }, hook, ms) {
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const text = (res) => res.text();
  const post = (path, body, extra = {}) =>
    fetch(`${url}/v1${path}`, {
      method: "POST",
      headers: { ...headers, ...extra },
      body: JSON.stringify(body),
    });
  const chat = (stream) =>
    post("/chat/completions", {
      model: "gpt-4o-mini",
      stream,
      messages: [{ role: "user", content: "How tall is the lighthouse?" }],
    }).then(text);
  const task = async (prompt, watch) => {
    const res = await post("/images/tasks", {
      model: "gpt-image-1",
      prompt,
      response_format: "url",
      partial_images: watch ? 2 : 0,
      webhook_url: hook,
    });
    const { id } = await res.json();
    if (!id) return;
    // Every other task is watched on its event stream until it ends, the others waited for.
    if (watch) await (await fetch(`${url}/v1/images/tasks/${id}/events`, { headers })).text();
    const done = await fetch(`${url}/v1/images/tasks/${id}?wait=30`, { headers });
    const body = await done.json();
    const link = body.data?.[0]?.url;
    if (link) await (await fetch(link)).arrayBuffer();
  };
  const end = Date.now() + ms;
  const running = new Set();
  let tasks = 0;
  const spawnTask = (prompt) => {
    const promise = task(prompt, ++tasks % 2 === 0).catch(() => {});
    running.add(promise);
    promise.finally(() => running.delete(promise));
  };
  let tick = 0;
  while (Date.now() < end) {
    tick += 1;
    await Promise.all([
      chat(false),
      tick % 2 === 0 ? chat(true) : undefined,
      tick % 3 === 0
        ? post("/responses", { model: "gpt-4o-mini", input: "Hello" }).then(text)
        : undefined,
      tick % 5 === 0 ? fetch(`${url}/v1/models`, { headers }).then(text) : undefined,
      tick % 7 === 0
        ? fetch(`${url}/v1/models`, { headers: { authorization: "Bearer sk-wrong" } })
        : undefined,
      tick % 11 === 0 ? fetch(`${url}/v1/no-such-route`, { headers }) : undefined,
      tick % 40 === 0
        ? post("/images/generations", { model: "gpt-image-1", prompt: "a sketch" })
        : 0,
    ]).catch(() => {});
    if (tick % 8 === 0) spawnTask("a lighthouse at dawn");
    if (tick % 60 === 0) for (let i = 0; i < 5; i += 1) spawnTask(`a burst of boats, ${i}`);
    if (tick % 30 === 0) spawnTask("!fail a refused prompt");
    await sleep(250);
  }
  await Promise.all(running);
}

/** A query as Grafana sends it; text variables (`$image_models`) at their defaults. */
const textVariables = dashboard.templating.list.filter((variable) => variable.type === "textbox");
const concrete = (expr) =>
  textVariables.reduce(
    (text, { name, query }) => text.replaceAll(`$${name}`, query),
    expr.replaceAll("$__rate_interval", RATE_INTERVAL).replaceAll('"$job"', '".+"'),
  );

function legend(format, metric) {
  if (!format) return Object.values(metric).join(" ") || "value";
  return format.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, name) => metric[name] ?? "").trim();
}

async function query(prom, path, params) {
  const search = new URLSearchParams(params);
  const answer = await (await fetch(`${prom}/api/v1/${path}?${search}`)).json();
  if (answer.status !== "success") throw new Error(`${params.query}: ${answer.error}`);
  return answer.data.result;
}

/** Every panel with the data its queries give over the window. */
async function panelData(prom, start, end) {
  const panels = [];
  for (const panel of dashboard.panels) {
    const entry = {
      type: panel.type,
      title: panel.title,
      gridPos: panel.gridPos,
      unit: panel.fieldConfig?.defaults?.unit ?? "short",
    };
    if (panel.type === "stat") {
      const [target] = panel.targets;
      const result = await query(prom, "query", { query: concrete(target.expr), time: end });
      entry.value = result.length ? Number(result[0].value[1]) : null;
    } else if (panel.type === "timeseries") {
      entry.series = [];
      for (const target of panel.targets) {
        const result = await query(prom, "query_range", {
          query: concrete(target.expr),
          start,
          end,
          step: STEP_SEC,
        });
        for (const series of result) {
          entry.series.push({
            name: legend(target.legendFormat, series.metric),
            points: series.values.map(([t, v]) => [Number(t), Number(v)]),
          });
        }
      }
    }
    panels.push(entry);
  }
  return panels;
}

try {
  const hook = await startReceiver();
  const service = await startService();
  const prom = await startPrometheus(new URL(service.url).host);
  const start = Math.floor(Date.now() / 1000);
  console.error(`load for ${LOAD_MS / 1000} s against ${service.url}, Prometheus at ${prom}`);
  await load(service, hook, LOAD_MS);
  await sleep(6000); // the last scrapes, and the webhook retries
  const end = Math.floor(Date.now() / 1000);
  const panels = await panelData(prom, start, end);
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  try {
    const tab = await browser.newPage({
      viewport: { width: 1100, height: 900 },
      deviceScaleFactor: 2,
    });
    await tab.setContent(page({ panels, start, end, stepSec: STEP_SEC, uplotDir }));
    await tab.waitForSelector("body[data-ready='1']");
    await tab.screenshot({ path: values.out, fullPage: true });
  } finally {
    await browser.close();
  }
  console.error(`wrote ${values.out}`);
} finally {
  for (const stop of stops.reverse()) await stop().catch(() => {});
  rmSync(work, { recursive: true, force: true });
}
process.exit(0);
