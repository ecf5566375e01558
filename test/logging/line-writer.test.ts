import { spawnSync } from "node:child_process";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { captureLines as capture } from "./capture-lines.js";
import { createLogger } from "../../src/logging/create-logger.js";
import { createLineWriter } from "../../src/logging/line-writer.js";

const KEYS = ["req_id", "route", "status", "model", "aborted", "note"] as const;

describe("createLineWriter", () => {
  it("writes the line pino writes for the same fields, odd strings included", async () => {
    const odd = 'quote " backslash \\ tab \t newline \n control \u0001 unicode é 图 emoji 🎨';
    const values = ["r-1", "/v1/chat/completions", 200, odd, true, undefined];
    const ours = capture();
    const theirs = capture();
    const base = { service: "image-task-sidecar" };
    const logger = pino({ base }, ours.stream).child({ replica: "host:1" });
    const reference = pino({ base }, theirs.stream).child({ replica: "host:1" });
    createLineWriter(logger, KEYS)("info", values, "request");
    reference.info(
      { req_id: "r-1", route: "/v1/chat/completions", status: 200, model: odd, aborted: true },
      "request",
    );
    await new Promise((done) => setImmediate(done));
    const [line] = ours.lines;
    const [expected] = theirs.lines;
    // Equal but for the time, which each took on its own.
    const withoutTime = (text = "") => text.replace(/"time":\d+/, '"time":0');
    expect(withoutTime(line)).toBe(withoutTime(expected));
    expect(JSON.parse(line ?? "")).toMatchObject({ level: 30, model: odd, replica: "host:1" });
    expect(line).not.toContain('"note"');
  });

  it("writes remembered values of repeating fields as pino does, line after line", async () => {
    const odd = 'model "quoted" \\ é';
    const ours = capture();
    const theirs = capture();
    const logger = pino({ base: null, timestamp: false }, ours.stream);
    const reference = pino({ base: null, timestamp: false }, theirs.stream);
    const write = createLineWriter(logger, KEYS, { repeating: ["route", "model", "note"] });
    // More distinct values than are remembered, each written twice, odd ones among them.
    const models = Array.from({ length: 300 }, (_, i) => (i % 7 === 0 ? `${odd} ${i}` : `m-${i}`));
    models.push("x".repeat(500));
    for (const model of [...models, ...models]) {
      write("info", ["r", "/v1/chat/completions", 200, model, undefined, "n"], "request");
      reference.info(
        { req_id: "r", route: "/v1/chat/completions", status: 200, model, note: "n" },
        "request",
      );
    }
    await new Promise((done) => setImmediate(done));
    expect(ours.lines).toHaveLength(models.length * 2);
    expect(ours.lines).toEqual(theirs.lines);
  });

  it("keeps no larger string alive through a remembered value", () => {
    // 200 client addresses, each a slice of a 1 MB string (as a value cut from a long header
    // can be): remembered as slices, they would hold 200 MB.
    const script = `
      const { pino } = await import("pino");
      const { createLineWriter } = await import(${JSON.stringify(
        new URL("../../dist/logging/line-writer.js", import.meta.url).href,
      )});
      const { Writable } = await import("node:stream");
      const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
      const write = createLineWriter(pino(sink), ["client_ip"], { repeating: ["client_ip"] });
      for (let i = 0; i < 200; i += 1) {
        const header = String(i).padStart(8, "0") + " ".repeat(1_000_000) + "192.168.100." + i;
        write("info", [header.slice(1_000_008)], "request");
      }
      globalThis.gc();
      console.log(process.memoryUsage().heapUsed);
    `;
    const run = spawnSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], {
      encoding: "utf8",
      cwd: new URL("../..", import.meta.url),
    });
    expect(run.stderr).toBe("");
    expect(Number(run.stdout.trim())).toBeLessThan(50 * 1024 * 1024);
  });

  it("passes every line through the logger's secret scrubbing", async () => {
    const { lines, stream } = capture();
    const logger = createLogger("debug", stream, ["sk-config-secret-0001"]);
    createLineWriter(logger, KEYS)("debug", ["r-2", "/healthz", 200, "sk-config-secret-0001"], "m");
    await new Promise((done) => setImmediate(done));
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain("sk-config-secret-0001");
    expect(JSON.parse(lines[0] ?? "")).toMatchObject({ level: 20, model: "[redacted]" });
  });

  it("leaves a logger it cannot match to pino (a mixin adds fields)", async () => {
    const { lines, stream } = capture();
    const logger = pino({ mixin: () => ({ extra: 1 }) }, stream);
    createLineWriter(logger, KEYS)("info", ["r-3"], "request");
    await new Promise((done) => setImmediate(done));
    expect(JSON.parse(lines[0] ?? "")).toMatchObject({ req_id: "r-3", extra: 1, msg: "request" });
  });
});

describe("createStdoutDestination", () => {
  it("holds lines for one write, and writes every held line when the process exits", () => {
    // A process that logs 100 lines, most of them still held, then exits at once.
    const script = `
      const { createLogger } = await import(${JSON.stringify(
        new URL("../../dist/logging/create-logger.js", import.meta.url).href,
      )});
      const logger = createLogger("info");
      for (let i = 0; i < 100; i += 1) logger.info({ i }, "line");
      process.exit(3);
    `;
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
    });
    expect(run.status).toBe(3);
    const lines = run.stdout.split("\n").filter(Boolean);
    expect(lines.map((line) => (JSON.parse(line) as { i: number }).i)).toEqual(
      Array.from({ length: 100 }, (_, i) => i),
    );
  });
});
