// Instructions: the chat passthrough's hot path counted in instructions per request with
// valgrind's callgrind, against the bare undici and node:http pipes (and the service with
// tracing on, and BASELINE's build): figures that do not move with the machine's load, to
// set beside the proxy phase's CPU time. Every process under test runs under callgrind (see
// lib/callgrind.mjs), all side by side (a count does not depend on what else runs): each is
// warmed up in chunks of 500 requests until three chunks agree (V8 has finished tiering up),
// then each round sends it a fixed number of chat requests, one at a time (concurrency 1: no
// batching that would depend on timing), counters zeroed before and dumped after.
import { copyFile, mkdir, readdir, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { callgrindAvailable, callgrindControl, callgrindPrefix } from "../lib/callgrind.mjs";
import { pick } from "../lib/mode.mjs";
import { CHAT_BODY, RESPONSES_BODY, editRequest } from "../lib/payloads.mjs";
import {
  AUTH,
  JSON_HEADERS,
  serviceConfig,
  startFakeChannel,
  startLoader,
  startPipe,
  startService,
  startUndiciPipe,
} from "../lib/processes.mjs";
import { fmt, fmtRatio, fmtSpread, spread } from "../lib/stats.mjs";
import { startTraceSink } from "../lib/trace-sink.mjs";

export const name = "instructions";

const LABELS = {
  pipe: "bare node:http pipe",
  "undici-pipe": "bare undici pipe",
  service: "service",
  traced: "service, tracing on",
  baseline: "service (BASELINE)",
  "baseline-traced": "service (BASELINE), tracing on",
};

/**
 * Requests counted per round (BENCH_CALLGRIND_REQUESTS), rounds, and the warm-up: in chunks of
 * `warmupChunk` requests, at least `warmupMin`, until three chunks in a row agree within
 * `settled` and V8's helper threads ran at most `quiet` of the main thread's instructions in
 * each (V8 has finished tiering up), at most `warmupMax` (BENCH_CALLGRIND_WARMUP).
 */
function plan(options) {
  const requests =
    Number(process.env.BENCH_CALLGRIND_REQUESTS) ||
    pick(options, { smoke: 50, quick: 500, full: 1000 });
  const warmupMax =
    Number(process.env.BENCH_CALLGRIND_WARMUP) ||
    pick(options, { smoke: requests, quick: 12_000, full: 24_000 });
  const request = process.env.BENCH_CALLGRIND_REQUEST ?? "chat";
  // BENCH_CALLGRIND_STORE=sqlite: each service on a SQLite file of its own (the embedded
  // default, where a /v1/responses answer writes its owner's row) instead of memory.
  const store = process.env.BENCH_CALLGRIND_STORE ?? "memory";
  if (store !== "memory" && store !== "sqlite") {
    throw new Error(`BENCH_CALLGRIND_STORE: ${store} is not memory or sqlite`);
  }
  if (!REQUESTS[request]) {
    throw new Error(`BENCH_CALLGRIND_REQUEST: ${request} is not one of ${Object.keys(REQUESTS)}`);
  }
  return {
    request,
    store,
    requests,
    warmupChunk: Math.min(requests, 500),
    warmupMin: Math.min(warmupMax, pick(options, { smoke: requests, quick: 2000, full: 4000 })),
    warmupMax,
    settled: 0.03,
    quiet: 0.05,
    rounds: pick(options, { smoke: 1, full: 3 }),
    // Tracing on is counted too: its CPU-time ratio read 1.22x to 1.43x across full runs of one
    // build, its rounds on both sides of its target (1.3x), where its instructions hold still.
    roles: (process.env.BENCH_CALLGRIND_TARGETS ?? "pipe,undici-pipe,service,traced,baseline")
      .split(",")
      .filter(Boolean),
  };
}

export function deadlineSec(options) {
  const { requests, warmupMax, rounds } = plan(options);
  // The service ran 10 to 50 chat requests a second under callgrind here beside the others
  // (the lower figure on a busy machine); start-up took up to a minute and a half.
  return Math.round(240 + (warmupMax + rounds * requests) / 10);
}

/**
 * The requests a count may send (BENCH_CALLGRIND_REQUEST; chat unless named), each made when
 * counted (the edit's form is 300 KB).
 */
const REQUESTS = {
  chat: {
    label: "chat",
    make: () => ({
      path: "/v1/chat/completions",
      method: "POST",
      headers: JSON_HEADERS,
      body: CHAT_BODY,
    }),
  },
  responses: {
    label: "/v1/responses",
    make: () => ({
      path: "/v1/responses",
      method: "POST",
      headers: JSON_HEADERS,
      body: RESPONSES_BODY,
    }),
  },
  // The proxy phase's multipart edit (300 KB form, the model first): the undici pipe does not
  // take forms, so count it against the node:http pipe (BENCH_CALLGRIND_TARGETS=pipe,service).
  edit: { label: "multipart edit (300 KB form)", make: () => editRequest(300, AUTH) },
};

/**
 * Starts the processes under test (BENCH_CALLGRIND_TARGETS, of pipe, undici-pipe, service,
 * traced, baseline, baseline-traced) under callgrind and switches instrumentation on in each; resolves them
 * with their controls.
 */
async function startCounted(ctx, channel, dir, wanted, store) {
  const traces = await startTraceSink(ctx);
  const under = (role) => ({
    prefix: callgrindPrefix(dir, role, ctx.options.pinning),
    timeoutMs: 300_000,
  });
  const configFor = (role) =>
    serviceConfig({
      channelUrl: channel.url,
      storeUrl: store === "sqlite" ? `sqlite://${join(dir, `${role}.db`)}` : "memory://",
      logging: { level: "info", access: true },
    });
  const starts = {
    pipe: () => startPipe(ctx, channel.url, under("pipe")),
    "undici-pipe": () => startUndiciPipe(ctx, channel.url, under("undici-pipe")),
    service: () => startService(ctx, configFor("service"), under("service")),
    traced: () =>
      startService(ctx, configFor("traced"), {
        role: "traced",
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: traces.url },
        ...under("traced"),
      }),
    baseline: () =>
      ctx.options.baseline
        ? // The service's configuration: access lines included, as in the service's count.
          startService(ctx, configFor("baseline"), {
            role: "baseline",
            ...under("baseline"),
          })
        : undefined,
    "baseline-traced": () =>
      ctx.options.baseline
        ? startService(ctx, configFor("baseline-traced"), {
            role: "baseline-traced",
            dist: ctx.options.baseline,
            env: { OTEL_EXPORTER_OTLP_ENDPOINT: traces.url },
            ...under("baseline-traced"),
          })
        : undefined,
  };
  const entries = await Promise.all(wanted.map((role) => starts[role]?.()));
  const targets = entries
    .filter(Boolean)
    .map((proc) => ({ role: proc.role, proc, control: callgrindControl(dir, proc.child.pid) }));
  await Promise.all(targets.map(({ control }) => control.instrumentOn()));
  return targets;
}

export async function run(ctx, out) {
  out.figures = {};
  if (!callgrindAvailable()) {
    out.notes.push("no valgrind here (apt-get install valgrind): instructions not counted");
    out.figures.skipped = true;
    return;
  }
  const settings = plan(ctx.options);
  out.figures = {
    ...settings,
    concurrency: 1,
    samples: {},
    targets: {},
    warmup: {},
    countedAgain: {},
  };
  const dir = join(ctx.tempDir, "callgrind");
  await mkdir(dir, { recursive: true });
  const channel = await startFakeChannel(ctx);
  const loader = await startLoader(ctx);
  ctx.log("instructions: starting the processes under valgrind");
  const keep = process.env.BENCH_CALLGRIND_KEEP;
  const targets = await withPerfMaps(keep !== undefined, () =>
    startCounted(ctx, channel, dir, settings.roles, settings.store),
  );
  const request = REQUESTS[settings.request].make();
  const send = (proc, count) =>
    loader.run({
      origins: [proc.url],
      requests: [request],
      concurrency: 1,
      count,
      timeoutMs: Math.max(10_000, ctx.remainingMs() - 5000),
    });
  // Each process on its own: warm-up until settled, then its rounds (counts do not depend
  // on what runs beside them, so the rounds need not be at the same time).
  await Promise.all(targets.map((target) => countTarget(ctx, target, settings, send, out)));
  if (keep !== undefined) await keepDumps(ctx, dir, keep, targets);
}

/**
 * Runs `start` with the processes it starts writing V8's perf map (`--perf-basic-prof`, through
 * NODE_OPTIONS, which they inherit), when `on`: what names their compiled JavaScript in a dump.
 */
async function withPerfMaps(on, start) {
  if (!on) return start();
  const before = process.env.NODE_OPTIONS;
  process.env.NODE_OPTIONS = [before, "--perf-basic-prof"].filter(Boolean).join(" ");
  try {
    return await start();
  } finally {
    if (before === undefined) delete process.env.NODE_OPTIONS;
    else process.env.NODE_OPTIONS = before;
  }
}

/**
 * Copies every dump (`callgrind.<role>.<pid>.<dump>-<thread>`; thread 01 is the main thread, the
 * highest dump the last round) and each process's perf map to `to`, for
 * `bench/callgrind-functions.mjs`.
 */
async function keepDumps(ctx, dir, to, targets) {
  await mkdir(to, { recursive: true });
  for (const name of await readdir(dir)) {
    if (name.startsWith("callgrind.")) await copyFile(join(dir, name), join(to, name));
  }
  for (const { proc } of targets) {
    const map = `/tmp/perf-${proc.child.pid}.map`;
    if (existsSync(map)) await copyFile(map, join(to, `perf-${proc.child.pid}.map`));
    await removeV8Log(proc.child.pid);
  }
  ctx.log(`instructions: callgrind dumps kept in ${to} (node bench/callgrind-functions.mjs)`);
}

/**
 * `--perf-basic-prof` turns V8's own log on too, as `isolate-<address>-<pid>-v8.log` in the
 * process's folder (the bench's: the checkout); NODE_OPTIONS cannot send it elsewhere (it refuses
 * `--logfile`), so it is removed once the process has run.
 */
async function removeV8Log(pid) {
  const suffix = `-${pid}-v8.log`;
  for (const name of await readdir(process.cwd())) {
    if (name.startsWith("isolate-") && name.endsWith(suffix)) await rm(name, { force: true });
  }
}

/** Counters zeroed, `count` requests, counters dumped: instructions per request. */
async function countChunk({ role, proc, control }, count, send) {
  await control.zero();
  const result = await send(proc, count);
  const { main, others } = await control.dump();
  if (result.ok !== count) throw new Error(`${role}: ${result.ok} of ${count} requests succeeded`);
  return { main: main / result.ok, all: (main + others) / result.ok };
}

/** One process: its warm-up until its counts settle, then its rounds. */
async function countTarget(ctx, target, settings, send, out) {
  const warmup = { requests: 0, settled: false, chunks: [], helpers: [] };
  out.figures.warmup[target.role] = warmup;
  const close = (a, b) => b !== undefined && Math.abs(a / b - 1) <= settings.settled;
  // V8's helper threads (its optimizing compiler above all) busy beside the main thread.
  const loud = ({ main, all }) => all - main > settings.quiet * main;
  const recent = [];
  while (warmup.requests < settings.warmupMax) {
    ctx.check();
    const chunk = await countChunk(target, settings.warmupChunk, send);
    const { main, all } = chunk;
    recent.push(chunk);
    warmup.requests += settings.warmupChunk;
    warmup.chunks.push(Math.round(main));
    warmup.helpers.push(Math.round(all - main));
    // Settled: three chunks in a row within `settled` of the last (a plateau can come before
    // a last tier-up), with V8's compiler threads quiet in each. Under callgrind the service
    // went on recompiling in waves long after its main-thread count first held still (helper
    // threads at 1.1x to 2.6x the main thread's count between 5,000 and 16,000 requests, main
    // up to 1.5x), each wave's deoptimized code run in lower tiers; from about 17,500 on,
    // helpers at 1 % and main within 1 %.
    const [a, b] = warmup.chunks.slice(-3, -1);
    const quiet = !recent.slice(-3).some(loud);
    warmup.settled = close(main, a) && close(main, b) && quiet;
    if (warmup.settled && warmup.requests >= settings.warmupMin) break;
  }
  ctx.log(
    `instructions: ${target.role} warmed up with ${warmup.requests} requests${warmup.settled ? "" : " (not settled)"}`,
  );
  const samples = (out.figures.samples[target.role] ??= []);
  let again = 0;
  while (samples.length < settings.rounds) {
    ctx.check();
    const sample = await countChunk(target, settings.requests, send);
    // A round in which V8 recompiled (its helper threads loud) ran code in lower tiers: counted
    // again in its place, at most `rounds` times (then kept: the spread shows it).
    if (loud(sample) && again < settings.rounds) {
      again += 1;
      out.figures.countedAgain[target.role] = again;
      continue;
    }
    samples.push(sample);
    summarize(out);
  }
}

/** Per-round ratios of `role` to `reference` (rounds paired: each round counts both). */
export function pairedRatios(list, reference) {
  if (!list || !reference) return [];
  return list.map((value, i) => value / reference[i]).filter((value) => Number.isFinite(value));
}

function summarize(out) {
  const { samples } = out.figures;
  const mains = (role) => samples[role]?.map((sample) => sample.main);
  const rows = [];
  for (const [role, list] of Object.entries(samples)) {
    const main = mains(role);
    const figures = {
      main: spread(main),
      all: spread(list.map((sample) => sample.all)),
      vsPipe: spread(pairedRatios(main, mains("pipe"))),
      vsUndici: spread(pairedRatios(main, mains("undici-pipe"))),
      vsService: spread(pairedRatios(main, mains("service"))),
    };
    out.figures.targets[role] = figures;
    const thousands = (v) => fmt(v / 1000);
    rows.push([
      LABELS[role],
      fmtSpread(figures.main, thousands),
      fmtSpread(figures.all, thousands),
      fmtSpread(figures.vsPipe, fmtRatio),
      fmtSpread(figures.vsUndici, fmtRatio),
    ]);
  }
  const { request, store, requests, rounds, warmup, countedAgain } = out.figures;
  const unsettled = Object.entries(warmup)
    .filter(([, w]) => !w.settled)
    .map(([role]) => LABELS[role]);
  out.tables = [
    {
      title: `Instructions per ${REQUESTS[request].label} request${store === "sqlite" ? ", SQLite store" : ""} (callgrind, concurrency 1; ${rounds} rounds of ${fmt(requests)} after a warm-up)`,
      columns: [
        "target",
        "k instr./req, main thread",
        "all threads",
        "vs node:http pipe",
        "vs undici pipe",
      ],
      rows,
    },
  ];
  out.notes = [
    "Counted by valgrind's callgrind, instrumented once each process was ready; the load generator and the fake channel run outside valgrind. Main thread: the event loop (JavaScript, its share of garbage collection, the system calls' user-side work); all threads adds V8's compiler and GC helper threads, whose bursts make it move from round to round.",
    `Median over rounds (min–max); ratios are of main-thread counts, taken round by round. Warm-up until three chunks of ${fmt(out.figures.warmupChunk)} in a row agreed within ${fmt(out.figures.settled * 100)} %, V8's helper threads under ${fmt(out.figures.quiet * 100)} % of the main thread's count in each: ${Object.entries(
      warmup,
    )
      .map(([role, w]) => `${LABELS[role]} ${fmt(w.requests)}`)
      .join(", ")} requests.`,
    ...(Object.keys(countedAgain).length
      ? [
          `Rounds counted again because V8 recompiled during them (helper threads over ${fmt(out.figures.quiet * 100)} % of the main thread): ${Object.entries(
            countedAgain,
          )
            .map(([role, times]) => `${LABELS[role]} ${times}`)
            .join(", ")}.`,
        ]
      : []),
    ...(unsettled.length
      ? [
          `Not settled after ${fmt(out.figures.warmupMax)} requests (counts still moving, or V8 still compiling: more warm-up, BENCH_CALLGRIND_WARMUP): ${unsettled.join(", ")}.`,
        ]
      : []),
  ];
}

export function targets() {
  return [];
}
