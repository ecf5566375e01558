import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

interface Recorder {
  file?: string;
  args: string[];
  attach(pid: number): void;
  done(graceMs?: number): Promise<void>;
}
type PerfRecorder = (
  ctx: { group: string; options: { perf?: string } },
  role: string,
  label?: string,
  dir?: string,
) => Recorder;

// A path in a variable: the bench is plain JavaScript without type declarations.
const MODULE = pathToFileURL(resolve(import.meta.dirname, "../../bench/lib/perf-record.mjs"));
const { perfRecorder, PERF_ARGS } = (await import(MODULE.href)) as {
  perfRecorder: PerfRecorder;
  PERF_ARGS: string[];
};

const perfRuns = (() => {
  const out = spawnSync("perf", ["--version"], { encoding: "utf8" });
  return !out.error && out.status === 0;
})();
const dir = mkdtempSync(join(tmpdir(), "bench-perf-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("BENCH_PERF: perf records of one role's processes", () => {
  it("leaves every other role, and the instructions phase, alone", () => {
    const other = perfRecorder({ group: "proxy", options: { perf: "service" } }, "pipe");
    expect(other.args).toEqual([]);
    const counted = perfRecorder(
      { group: "instructions", options: { perf: "service" } },
      "service",
    );
    expect(counted.args).toEqual([]);
    const unset = perfRecorder({ group: "proxy", options: {} }, "service");
    expect(unset.args).toEqual([]);
  });

  it.skipIf(!perfRuns)("records each role of a list, and only those", () => {
    const options = { perf: "service, undici-pipe" };
    expect(perfRecorder({ group: "proxy", options }, "service").args).toEqual(PERF_ARGS);
    expect(perfRecorder({ group: "proxy", options }, "undici-pipe").args).toEqual(PERF_ARGS);
    expect(perfRecorder({ group: "proxy", options }, "pipe").args).toEqual([]);
  });

  it.skipIf(!perfRuns)(
    "records the process for its whole life, its JIT code named",
    async () => {
      const recorder = perfRecorder(
        { group: "t", options: { perf: "service" } },
        "service",
        "x",
        dir,
      );
      expect(recorder.args).toEqual(PERF_ARGS);
      // Busy for a while, so that perf has samples to write, in a function called again and
      // again: V8 compiles it for certain. A loop in the script's top level was not always
      // (Node 22 left it in the interpreter in some runs, and the report had no JIT code).
      // In a folder of its own, to see that it leaves nothing there (V8's log went elsewhere).
      const cwd = mkdtempSync(join(dir, "cwd-"));
      const child = spawn(
        process.execPath,
        [
          ...recorder.args,
          "-e",
          "function spin(n) { for (let i = 0; i < 1e5; i += 1) n += Math.sqrt(i); return n % 1e9; }" +
            " let n = 0; const end = Date.now() + 1500; while (Date.now() < end) n = spin(n);",
        ],
        { cwd },
      );
      const exited = new Promise((done) => child.once("exit", done));
      recorder.attach(child.pid!);
      await exited;
      await recorder.done();
      expect(recorder.file).toBeDefined();
      expect(existsSync(recorder.file!)).toBe(true);
      const report = spawnSync(
        "perf",
        ["report", "-i", recorder.file!, "--stdio", "--no-children", "--sort", "comm,sym"],
        { encoding: "utf8" },
      );
      rmSync(`/tmp/perf-${child.pid}.map`, { force: true });
      // The busy function, compiled by V8, under the name the map gave it.
      expect(report.stdout).toMatch(/node\s+\[\.\] JS:\S* ?spin /);
      expect(readdirSync(cwd)).toEqual([]);
    },
    30_000,
  );
});
