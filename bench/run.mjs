// npm run bench [-- PHASE... ] [--quick|--smoke] [--control] [--rounds N] [--round-sec S] [--out DIR]
//
// The one place where the service's cost is measured: each phase starts its own processes
// (fake channel, bare pipes, the service from dist/, a load generator), measures side by side
// in interleaved rounds and reports medians with their spread, ratios and CPU per request,
// which hold on a shared machine where absolute figures do not; the instructions phase counts
// instructions per request under callgrind, which do not move with the machine's load.
// Phases: proxy, instructions, streams, tasks, memory, events (default: all, in that order).
//
//   BENCH_PHASES=tasks,memory     the same as naming phases on the command line
//   --quick / BENCH_QUICK=1       fewer and shorter rounds: rough figures in a few minutes
//   --smoke / BENCH_SMOKE=1       tiny counts: sees that every phase works (figures meaningless)
//   --rounds N / BENCH_ROUNDS     interleaved rounds per figure (default 5, quick 3)
//   --round-sec S / BENCH_ROUND_SEC  seconds of load per target per round (default 3, quick 1)
//   --out DIR / BENCH_RESULTS_DIR where the JSON and latest.md go (default bench/results)
//   BASELINE=/path/to/other/dist  also measures another build of the service (its dist/ beside
//                                 a node_modules/) in the same interleaved rounds and, in the
//                                 proxy phase, at the same time as the service
//   --control / BENCH_CONTROL=1   BASELINE is the run's own dist/: a control run, whose
//                                 service/BASELINE ratios should read 1.00x within their spread
//   BENCH_PROFILE=service         a V8 CPU profile of each process of that role (service,
//                                 access-off, traced, pipe, undici-pipe, channel, baseline),
//                                 named after the phase, into bench-profiles/
//   BENCH_PERF=service            `perf record` of each process of that role (the same roles;
//                                 several with commas), JIT code named (--perf-basic-prof), into
//                                 bench-profiles/
//   BENCH_PIN=0                   no pinning (default: taskset, where there are 2+ cores)
//   BENCH_LOADER=node             the Node load generator for the proxy phase even with wrk
//   BENCH_LOADS, BENCH_CALLGRIND_TARGETS, BENCH_CALLGRIND_REQUESTS, BENCH_CALLGRIND_WARMUP,
//   BENCH_HELD, BENCH_MALLOC_MMAP_THRESHOLD, BENCH_REDIS_URL: see docs/performance.md
//
// Every phase has a deadline: past it the phase's processes are killed and what it measured
// so far is reported, marked partial. Every child is killed at the end, on error and on Ctrl-C.
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { between, snapshot } from "./lib/busy.mjs";
import { childCount, killAllNow, startedPids, stopChildren } from "./lib/children.mjs";
import { setUpPinning } from "./lib/cores.mjs";
import { issueTargets } from "./lib/issue-targets.mjs";
import { describeMachine } from "./lib/machine.mjs";
import { TMPFS } from "./lib/real-size.mjs";
import { deletePrefix } from "./lib/redis-keys.mjs";
import { renderText, writeResults } from "./lib/report.mjs";
import * as proxy from "./phases/proxy.mjs";
import * as instructions from "./phases/instructions.mjs";
import * as streams from "./phases/streams.mjs";
import * as tasks from "./phases/tasks.mjs";
import * as memory from "./phases/memory.mjs";
import * as events from "./phases/events.mjs";

const PHASES = { proxy, instructions, streams, tasks, memory, events };
const ROOT = resolve(import.meta.dirname, "..");

function readOptions() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      quick: { type: "boolean", default: process.env.BENCH_QUICK === "1" },
      smoke: { type: "boolean", default: process.env.BENCH_SMOKE === "1" },
      control: { type: "boolean", default: process.env.BENCH_CONTROL === "1" },
      rounds: { type: "string", default: process.env.BENCH_ROUNDS },
      "round-sec": { type: "string", default: process.env.BENCH_ROUND_SEC },
      out: {
        type: "string",
        default: process.env.BENCH_RESULTS_DIR ?? join(ROOT, "bench/results"),
      },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const named = positionals.length
    ? positionals
    : (process.env.BENCH_PHASES ?? "").split(/[\s,]+/).filter(Boolean);
  const phases = named.length ? named : Object.keys(PHASES);
  const unknown = phases.filter((phase) => !PHASES[phase]);
  if (values.help || unknown.length) {
    if (unknown.length) console.error(`unknown phase: ${unknown.join(", ")}`);
    console.error(
      `usage: npm run bench -- [${Object.keys(PHASES).join("|")}]... [--quick|--smoke] [--control] [--rounds N] [--round-sec S] [--out DIR]`,
    );
    process.exit(values.help ? 0 : 2);
  }
  const dist = resolve(process.env.BENCH_DIST ?? join(ROOT, "dist"));
  if (values.control && process.env.BASELINE) {
    console.error("--control measures the run's own build as BASELINE: leave BASELINE unset");
    process.exit(2);
  }
  const baseline = values.control
    ? dist
    : process.env.BASELINE
      ? resolve(process.env.BASELINE)
      : undefined;
  for (const dir of [dist, baseline].filter(Boolean)) {
    if (!existsSync(join(dir, "server.js"))) {
      console.error(`${dir}/server.js is missing: build it first (npm run build)`);
      process.exit(2);
    }
  }
  const mode = values.smoke ? "smoke" : values.quick ? "quick" : "full";
  const rounds = Number(values.rounds ?? { smoke: 1, quick: 3, full: 5 }[mode]);
  const roundSec = Number(values["round-sec"] ?? { smoke: 0.1, quick: 1, full: 3 }[mode]);
  if (!(Number.isInteger(rounds) && rounds >= 1) || !(roundSec > 0)) {
    console.error("--rounds takes a whole number from 1, --round-sec a number of seconds over 0");
    process.exit(2);
  }
  return {
    phases,
    mode,
    quick: mode !== "full",
    rounds,
    roundSec,
    out: resolve(values.out),
    dist,
    baseline,
    control: values.control,
    profile: process.env.BENCH_PROFILE || undefined,
    perf: process.env.BENCH_PERF || undefined,
  };
}

const options = readOptions();
// Before anything starts: the load average then is the other processes'.
const runBefore = snapshot();
options.pinning = setUpPinning();
const started = Date.now();
const redisPrefixes = new Set();
let interrupted = false;
let current; // the running phase's abort controller

async function cleanRedis() {
  for (const prefix of redisPrefixes) {
    await deletePrefix(prefix).catch(() => undefined);
    redisPrefixes.delete(prefix);
  }
}

function onSignal(signal) {
  if (interrupted) {
    killAllNow();
    process.exit(130);
  }
  interrupted = true;
  console.error(`\n${signal}: stopping every child process, cleaning up...`);
  current?.abort(new Error(`interrupted (${signal})`));
  killAllNow();
  // The main loop reports and cleans up; if it cannot within 5 s, leave anyway.
  setTimeout(() => process.exit(130), 5000).unref();
}
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);
process.on("exit", killAllNow);

const tempDir = await mkdtemp(join(tmpdir(), "bench-"));
const runId = `bench-${started.toString(36)}-${process.pid}`;
const result = {
  meta: {
    date: new Date(started).toISOString(),
    mode: options.mode,
    quick: options.quick,
    rounds: options.rounds,
    roundSec: options.roundSec,
    phases: options.phases,
    baseline: options.baseline ?? null,
    control: options.control,
    machine: describeMachine(),
    pinning: options.pinning,
    profile: options.profile ?? null,
    perf: options.perf ?? null,
  },
  phases: {},
  targets: [],
};
const log = (message) =>
  console.error(`[${((Date.now() - started) / 1000).toFixed(0).padStart(3)} s] ${message}`);

// A watchdog over the whole run, whatever a phase does.
const budgetMs =
  options.phases.reduce((sum, phase) => sum + PHASES[phase].deadlineSec(options) * 1000, 0) +
  30_000;
setTimeout(() => {
  console.error(`bench: over its ${budgetMs / 1000} s budget, killing everything`);
  killAllNow();
  process.exit(1);
}, budgetMs).unref();

for (const phaseName of options.phases) {
  if (interrupted) break;
  const phase = PHASES[phaseName];
  const controller = new AbortController();
  current = controller;
  const deadlineMs = phase.deadlineSec(options) * 1000;
  const out = { status: "ok", tables: [], figures: {}, notes: [] };
  result.phases[phaseName] = out;
  const phaseStarted = Date.now();
  const phaseBefore = snapshot();
  const ctx = {
    group: phaseName,
    options,
    tempDir,
    runId,
    signal: controller.signal,
    log,
    deadline: phaseStarted + deadlineMs,
    remainingMs: () => Math.max(0, phaseStarted + deadlineMs - Date.now()),
    /** Throws once the phase is past its deadline or interrupted. */
    check: () => controller.signal.throwIfAborted(),
    /** A Redis prefix the phase writes under: deleted when the phase ends, whatever happens. */
    redisPrefix: (label) => {
      const prefix = `${runId}-${label}`;
      redisPrefixes.add(prefix);
      return prefix;
    },
  };
  log(`${phaseName}: starting (deadline ${deadlineMs / 1000} s)`);
  const timer = setTimeout(
    () => controller.abort(new Error(`deadline of ${deadlineMs / 1000} s reached`)),
    deadlineMs,
  );
  const aborted = new Promise((_, reject) =>
    controller.signal.addEventListener("abort", () => reject(controller.signal.reason), {
      once: true,
    }),
  );
  const running = phase.run(ctx, out);
  running.catch(() => undefined);
  try {
    await Promise.race([running, aborted]);
  } catch (err) {
    const message = err?.message ?? String(err);
    out.status = interrupted ? "interrupted" : controller.signal.aborted ? "partial" : "failed";
    out.error = message;
    log(`${phaseName}: ${out.status}: ${message}`);
  } finally {
    clearTimeout(timer);
    if (!controller.signal.aborted) controller.abort(new Error("phase over"));
    await stopChildren(phaseName);
    await cleanRedis();
  }
  out.seconds = Math.round((Date.now() - phaseStarted) / 100) / 10;
  out.busy = between(phaseBefore, snapshot());
  log(`${phaseName}: ${out.status} in ${out.seconds} s`);
}

await stopChildren();
await cleanRedis();
await rm(tempDir, { recursive: true, force: true });
// What phases put in memory-backed folders (named after the run), also after one failed.
for (const entry of await readdir(TMPFS).catch(() => [])) {
  if (entry.startsWith(runId)) await rm(join(TMPFS, entry), { recursive: true, force: true });
}
// The issue's targets first (they take figures from several phases), then each phase's own.
result.targets.push(...issueTargets(result.phases));
for (const [phaseName, out] of Object.entries(result.phases)) {
  try {
    result.targets.push(...PHASES[phaseName].targets(out.figures));
  } catch {
    // a phase that failed early has no figures to compare
  }
}
result.meta.busy = between(runBefore, snapshot());
result.meta.durationSec = Math.round((Date.now() - started) / 100) / 10;
if (interrupted) result.meta.interrupted = true;
result.meta.childPids = startedPids;
console.log(renderText(result));
const file = await writeResults(options.out, result);
console.log(`\nresults: ${file} (and latest.md, latest.json beside it)`);
if (options.profile)
  console.log(`CPU profiles (${options.profile}): ${join(ROOT, "bench-profiles")}/`);
if (options.perf)
  console.log(`perf records (${options.perf}): ${join(ROOT, "bench-profiles")}/*.perf.data`);
if (childCount() > 0) console.error(`bench: ${childCount()} child processes were still running`);
process.exit(interrupted ? 130 : 0);
