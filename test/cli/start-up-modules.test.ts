import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it, onTestFinished } from "vitest";
import { deleteKeys, REDIS_URL, uniquePrefix } from "../support/redis.js";
import { slow } from "../support/time-factor.js";

/*
 * A service starts with what its configuration uses: the MCP SDK, jose and
 * the Redis clients (ioredis, BullMQ) are loaded when first needed, not at
 * start-up (together about 40 % of the start-up CPU on the embedded
 * defaults), so a replica of a rollout or a sidecar starts faster. The built
 * service is started in a process of its own, whose module resolutions a
 * loader hook reports.
 */

const run = promisify(execFile);
const DIST = resolve("dist");
/** One key, every model, the built-in demo channel: the embedded defaults' shape. */
const DEMO = {
  auth: { keys: [{ name: "start-up", key: "sk-start-up", group: "demo" }] },
  groups: { demo: { models: ["*"] } },
  channels: [{ name: "demo", type: "demo", models: ["gpt-image-1"] }],
};
const WATCHED = ["@modelcontextprotocol", "jose", "bullmq", "ioredis"];

/** The watched packages a service on `config` has loaded once it listens, and after one MCP call. */
async function loadedPackages(config: object) {
  // A resolve hook (it runs on the loaders' thread) posts every URL resolved, ESM and CommonJS
  // packages alike, to the main thread; a package counts as loaded once one of its files is.
  const hook = [
    "let port;",
    "export async function initialize(data) { port = data.port; }",
    "export async function resolve(specifier, context, next) {",
    "  const resolved = await next(specifier, context);",
    "  port.postMessage(resolved.url);",
    "  return resolved;",
    "}",
  ].join("\n");
  const script = `
    import { register } from "node:module";
    import { MessageChannel } from "node:worker_threads";
    import { setTimeout as sleep } from "node:timers/promises";
    const { port1, port2 } = new MessageChannel();
    const urls = new Set();
    port1.on("message", (url) => urls.add(url));
    port1.unref();
    register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hook)}`)}, import.meta.url, {
      data: { port: port2 },
      transferList: [port2],
    });
    const loaded = async () => {
      await sleep(200);
      return ${JSON.stringify(WATCHED)}.filter((name) =>
        [...urls].some((url) => url.includes("/node_modules/" + name + "/")),
      );
    };
    const { pino } = await import("pino");
    const { startServer } = await import(${JSON.stringify(join(DIST, "server.js"))});
    const { parseConfig } = await import(${JSON.stringify(join(DIST, "config/load-config.js"))});
    const config = parseConfig(${JSON.stringify(config)});
    const running = await startServer({ config, logger: pino({ level: "silent" }), defaultMetrics: false });
    const atStart = await loaded();
    const mcp = await fetch(running.url + "/mcp", {
      method: "POST",
      headers: { authorization: "Bearer sk-start-up", "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    const afterMcp = await loaded();
    await running.close();
    console.log(JSON.stringify({ atStart, afterMcp, mcpStatus: mcp.status }));
  `;
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
    cwd: resolve("."),
    timeout: slow(30_000),
  });
  return JSON.parse(stdout.trim().split("\n").at(-1) ?? "") as {
    atStart: string[];
    afterMcp: string[];
    mcpStatus: number;
  };
}

describe("start-up", () => {
  it("on SQLite loads neither the MCP SDK, jose nor the Redis clients; an MCP call loads the SDK", async () => {
    const dir = await mkdtemp(join(tmpdir(), "start-up-"));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const loaded = await loadedPackages({
      server: { port: 0 },
      store: { url: `sqlite://${join(dir, "tasks.db")}` },
      images: { url: `file://${join(dir, "images")}` },
      ...DEMO,
    });
    expect(loaded.atStart).toEqual([]);
    expect(loaded.mcpStatus).toBe(200);
    expect(loaded.afterMcp).toEqual(["@modelcontextprotocol"]);
  });

  it("on Redis loads BullMQ and ioredis, still not the MCP SDK or jose", async () => {
    const prefix = uniquePrefix("start-up");
    const dir = await mkdtemp(join(tmpdir(), "start-up-"));
    onTestFinished(async () => {
      await deleteKeys(prefix);
      await rm(dir, { recursive: true, force: true });
    });
    const loaded = await loadedPackages({
      server: { port: 0 },
      store: { url: REDIS_URL, prefix },
      images: { url: `file://${join(dir, "images")}` },
      ...DEMO,
    });
    expect(loaded.atStart).toEqual(["bullmq", "ioredis"]);
    expect(loaded.afterMcp).toEqual(["@modelcontextprotocol", "bullmq", "ioredis"]);
  });
});
