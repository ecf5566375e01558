import { isAlive } from "../support/process-alive.js";
import { slow } from "../support/time-factor.js";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

interface BenchResult {
  meta: {
    quick: boolean;
    mode: string;
    pinning: { pinned: boolean; reason: string };
    phases: string[];
    machine: { node: string; cpuCount: number; note: string };
    childPids: number[];
  };
  phases: Record<string, { status: string; figures: Record<string, unknown>; tables: unknown[] }>;
  targets: { target: string; measured: string; ratio?: string; met: boolean | null }[];
}

/** Runs `node bench/run.mjs ARGS` to its end (SIGKILLed past `ms`); resolves its exit code and output. */
function runBench(args: string[], ms: number, env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ["bench/run.mjs", ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill("SIGKILL"), ms);
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((done) =>
    child.once("exit", (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    }),
  );
}

describe("npm run bench --smoke", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it(
    "measures the proxy phase and writes its figures, leaving no process behind",
    async () => {
      expect(existsSync(join(ROOT, "dist/server.js")), "dist/ is built by npm test").toBe(true);
      const out = await mkdtemp(join(tmpdir(), "bench-smoke-"));
      dirs.push(out);
      // A few seconds on a quiet machine; the bench's own deadlines bound it on a loaded one.
      const run = await runBench(["proxy", "--smoke", "--out", out], slow(40_000));
      expect(run.code, run.stderr).toBe(0);
      // What a user sees: the table with the figures and the targets.
      expect(run.stdout).toContain("bare node:http pipe");
      expect(run.stdout).toContain("Targets (printed, never asserted)");

      const result = JSON.parse(await readFile(join(out, "latest.json"), "utf8")) as BenchResult;
      expect(result.meta.quick).toBe(true);
      expect(result.meta.mode).toBe("smoke");
      // Whether the processes were pinned, and why not when they were not, is on record.
      expect(result.meta.pinning.reason).toBeTruthy();
      expect(run.stdout).toMatch(/^Pinning: /m);
      expect(result.meta.phases).toEqual(["proxy"]);
      expect(result.meta.machine.cpuCount).toBeGreaterThan(0);
      expect(result.meta.machine.note).toMatch(/share/);
      const proxy = result.phases.proxy!;
      expect(proxy.status).toBe("ok");
      const loads = proxy.figures.loads as Record<
        string,
        { targets: Record<string, { rps: number; p50Ms: number; cpuUsPerRequest: number }> }
      >;
      for (const target of ["direct", "pipe", "service"]) {
        const figures = loads["chat-c64"]!.targets[target]!;
        expect(figures.rps).toBeGreaterThan(0);
        expect(figures.p50Ms).toBeGreaterThan(0);
        expect(figures.cpuUsPerRequest).toBeGreaterThan(0);
      }
      expect(loads["edits-c4"]!.targets.service!.rps).toBeGreaterThan(0);
      // The core under test's speed, read before each measurement, a median for the one round.
      const speed = proxy.figures.speed as { roundMs: number[]; slowRounds: number[] };
      expect(speed.roundMs).toHaveLength(1);
      expect(speed.roundMs[0]).toBeGreaterThan(0);
      expect(run.stdout).toMatch(/The core under test's speed, a fixed loop timed/);
      expect(result.targets.map((t) => t.target).join("\n")).toMatch(/bare pipe/);
      // A performance target's line carries the ratio it is judged on.
      const c1 = result.targets.find((t) => /concurrency 1: CPU per request/.test(t.target));
      expect(c1?.ratio).toMatch(/^\d+\.\d\dx$/);
      expect(await readFile(join(out, "latest.md"), "utf8")).toMatch(
        /^\| load +\| target +\| +RPS/m,
      );

      // Every child the bench started is gone.
      expect(result.meta.childPids.length).toBeGreaterThanOrEqual(4);
      expect(result.meta.childPids.filter(isAlive)).toEqual([]);
    },
    slow(45_000),
  );

  it(
    "with --control, measures the run's own build as BASELINE, in turn and at the same time",
    async () => {
      const out = await mkdtemp(join(tmpdir(), "bench-smoke-"));
      dirs.push(out);
      const run = await runBench(["proxy", "--smoke", "--control", "--out", out], 40_000, {
        BENCH_LOADS: "chat-c1",
      });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain("the service against BASELINE");
      expect(run.stdout).toContain("--control: the run's own build");
      const result = JSON.parse(await readFile(join(out, "latest.json"), "utf8")) as BenchResult;
      const load = result.phases.proxy!.figures.loads as Record<
        string,
        {
          targets: Record<string, { cpuUsPerRequest: number }>;
          vsBaseline: Record<"inTurn" | "together", { cpu: { median: number } }>;
        }
      >;
      const c1 = load["chat-c1"]!;
      expect(c1.targets.baseline!.cpuUsPerRequest).toBeGreaterThan(0);
      expect(c1.vsBaseline.inTurn.cpu.median).toBeGreaterThan(0);
      expect(c1.vsBaseline.together.cpu.median).toBeGreaterThan(0);
      expect(result.meta.childPids.filter(isAlive)).toEqual([]);
    },
    slow(45_000),
  );
});
