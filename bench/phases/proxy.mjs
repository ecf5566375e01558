// Proxy: what the service costs on the passthrough routes, side by side with a direct call to
// the same fake channel, the bare node:http pipe (the floor for any Node proxy), the same pipe
// with undici as its client (the best Node pipe) and, where it is installed, nginx. Rounds are
// interleaved: each round measures every load on every target, in an order that turns from
// round to round, so that drift on the machine hits every target alike. Figures are medians
// over rounds with their spread (min–max); ratios are taken round by round (a target against
// the pipe measured next to it) before their median. The load comes from wrk where it is
// installed (a few µs per request), else from the Node load generator; the processes under
// test run pinned to their own core where the machine allows. With BASELINE, the service and
// BASELINE are measured next to each other in every round (changing places) and, once more,
// both at the same time: the ratio of that pair is the one a change is judged by (see
// proxy-measure.mjs for why).
import { baselineFigures, baselineTable } from "../lib/baseline-pair.mjs";
import { CHAT_BODY, RESPONSES_BODY, editRequest } from "../lib/payloads.mjs";
import { pick } from "../lib/mode.mjs";
import { nginxAvailable, startNginxPipe } from "../lib/nginx-pipe.mjs";
import {
  JSON_HEADERS,
  AUTH,
  startFakeChannel,
  startLoader,
  startPipe,
  startService,
  startUndiciPipe,
  serviceConfig,
} from "../lib/processes.mjs";
import { fmt, fmtRatio, fmtSpread, median, spread } from "../lib/stats.mjs";
import { startTraceSink } from "../lib/trace-sink.mjs";
import { measure as measureOne, measureTogether, roundOrder } from "../lib/proxy-measure.mjs";
import { speedNote, speedSummary, startSpeedProbe } from "../lib/speed-probe.mjs";
import { wrkAvailable } from "../lib/wrk.mjs";

export const name = "proxy";

const TARGET_LABELS = {
  direct: "direct to the channel",
  pipe: "bare node:http pipe",
  "undici-pipe": "bare undici pipe",
  nginx: "nginx",
  service: "service",
  "access-off": "service, logging.access: false",
  traced: "service, tracing on",
  baseline: "service (BASELINE)",
};

/** The two targets measured at the same time as well, each round, where a load has both. */
const TOGETHER = ["service", "baseline"];

const chatRequest = {
  path: "/v1/chat/completions",
  method: "POST",
  headers: JSON_HEADERS,
  body: CHAT_BODY,
};

/**
 * Every load the phase knows; BENCH_LOADS picks some. Chat runs at concurrency 32 and 64 both, as
 * the judgement measures the passthrough (c=32 has no target line of its own).
 */
function loads(options) {
  const edit = editRequest(options.mode === "smoke" ? 32 : 300, AUTH);
  return [
    {
      key: "chat-c1",
      label: "chat, ~1 KB answer, concurrency 1",
      concurrency: 1,
      request: chatRequest,
      targets: ["pipe", "undici-pipe", "service", "baseline"],
    },
    {
      key: "chat-c32",
      label: "chat, ~1 KB answer, concurrency 32",
      concurrency: 32,
      request: chatRequest,
      targets: ["pipe", "undici-pipe", "nginx", "service", "baseline"],
    },
    {
      key: "chat-c64",
      label: "chat, ~1 KB answer, concurrency 64",
      concurrency: 64,
      request: chatRequest,
      targets: [
        "direct",
        "pipe",
        "undici-pipe",
        "nginx",
        "service",
        "access-off",
        "traced",
        "baseline",
      ],
    },
    {
      key: "responses-c16",
      label: "/v1/responses, concurrency 16",
      concurrency: 16,
      request: {
        path: "/v1/responses",
        method: "POST",
        headers: JSON_HEADERS,
        body: RESPONSES_BODY,
      },
      targets: ["pipe", "undici-pipe", "service", "baseline"],
    },
    {
      key: "edits-c4",
      label: `/v1/images/edits, ${edit.kib} KB form, concurrency 4`,
      concurrency: 4,
      request: edit,
      targets: ["pipe", "service", "baseline"],
    },
  ];
}

/** BENCH_LOADS=edits-c4,chat-c64 measures only those loads (to profile one of them). */
function chosenLoads(options) {
  const only = process.env.BENCH_LOADS?.split(",").filter(Boolean);
  return only?.length ? loads(options).filter((load) => only.includes(load.key)) : loads(options);
}

/** Seconds of load per target per round, and of warm-up per target. */
function timing(options) {
  return {
    rounds: options.rounds,
    durationMs: options.roundSec * 1000,
    warmupMs: pick(options, { smoke: 50, quick: 1000, full: 2000 }),
  };
}

export function deadlineSec(options) {
  const { rounds, durationMs, warmupMs } = timing(options);
  // With BASELINE, two more measurements a load: the service and BASELINE at the same time.
  const pairs = chosenLoads(options).reduce(
    (sum, load) => sum + load.targets.length + (options.baseline ? 2 : 0),
    0,
  );
  // Each measurement: its load, wrk's start and the stats calls (about half a second).
  const perPair = warmupMs / 1000 + rounds * (Math.max(1, durationMs / 1000) + 0.5);
  return Math.round(40 + pairs * perPair * 1.3);
}

export async function run(ctx, out) {
  const { options } = ctx;
  const { rounds, durationMs, warmupMs } = timing(options);
  // wrk counts whole seconds: shorter rounds (the smoke run's) take the Node load generator.
  const useWrk = process.env.BENCH_LOADER !== "node" && durationMs >= 1000 && wrkAvailable();
  const channel = await startFakeChannel(ctx);
  const traces = await startTraceSink(ctx);
  // As shipped: access lines at info. Beside it, the same without them, and with tracing on.
  const logged = (access) =>
    serviceConfig({ channelUrl: channel.url, logging: { level: "info", access } });
  const plan = chosenLoads(options);
  const wanted = new Set(plan.flatMap((load) => load.targets));
  const maybe = (target, start) => (wanted.has(target) ? start() : undefined);
  const haveNginx = wanted.has("nginx") && nginxAvailable();
  const [pipe, undiciPipe, nginx, service, accessOff, traced, baseline, loader] = await Promise.all(
    [
      maybe("pipe", () => startPipe(ctx, channel.url)),
      maybe("undici-pipe", () => startUndiciPipe(ctx, channel.url)),
      haveNginx ? startNginxPipe(ctx, channel.url) : undefined,
      startService(ctx, logged(true)),
      maybe("access-off", () => startService(ctx, logged(false), { role: "access-off" })),
      maybe("traced", () =>
        startService(ctx, logged(true), {
          role: "traced",
          env: { OTEL_EXPORTER_OTLP_ENDPOINT: traces.url },
        }),
      ),
      // The same configuration as the service's: a baseline without access lines would
      // look cheaper by what the lines cost.
      options.baseline && wanted.has("baseline")
        ? startService(ctx, logged(true), { role: "baseline" })
        : undefined,
      useWrk ? undefined : startLoader(ctx),
    ],
  );
  // A smoke run's rounds last 0.1 s: one run of the loop a reading, not the fastest of three.
  const probe = await startSpeedProbe(ctx, pick(options, { smoke: 1, quick: 3, full: 3 }));
  const targets = Object.fromEntries(
    Object.entries({
      direct: channel,
      pipe,
      "undici-pipe": undiciPipe,
      nginx,
      service,
      "access-off": accessOff,
      traced,
      baseline,
    }).filter(([, proc]) => proc),
  );
  const measured = plan.map((load) => ({
    ...load,
    targets: load.targets.filter((target) => targets[target]),
  }));
  // samples[load][target][round] = {rps, p50Ms, p99Ms, cpuUs, failed}; and
  // samples[load].together[2 * round + i] = {service, baseline}: the two loaded at the same time.
  const samples = {};
  out.figures = {
    rounds,
    durationMs,
    warmupMs,
    loader: useWrk ? "wrk" : "node",
    nginx: haveNginx,
    loads: {},
  };
  out.figures.nginxMissing = wanted.has("nginx") && !haveNginx;

  const env = { useWrk, loader, targets, probe };
  const measure = (load, target, ms) => measureOne(ctx, env, load, target, ms);

  // Warm-up: JIT, sockets, keep-alive pools. Two seconds a target: with less, the optimizing
  // compiler was still at work on the service (its threads count in its CPU) in the first round.
  // Its figures are not kept: no probe before it.
  const warmEnv = { ...env, probe: undefined };
  for (const load of measured)
    for (const target of load.targets) await measureOne(ctx, warmEnv, load, target, warmupMs);

  for (let round = 0; round < rounds; round += 1) {
    for (const load of measured) {
      const got = (samples[load.key] ??= {});
      for (const target of roundOrder(load.targets, round)) {
        ctx.check();
        const sample = await measure(load, target, durationMs);
        (got[target] ??= []).push(sample);
      }
      if (TOGETHER.every((target) => load.targets.includes(target))) {
        // Twice a round, each load generator started first once (the order turns by round).
        for (const flip of round % 2 ? [true, false] : [false, true]) {
          ctx.check();
          const names = flip ? [...TOGETHER].reverse() : TOGETHER;
          const pair = await measureTogether(ctx, env, load, names, durationMs);
          const [service, baseline] = flip ? [...pair].reverse() : pair;
          (got.together ??= []).push({ service, baseline });
        }
      }
    }
    summarize(out, measured, samples);
    ctx.log(`proxy: round ${round + 1}/${rounds} done`);
  }
}

/** Round-by-round ratios of `field` between two targets' samples (the rounds both have). */
export function paired(list, reference, field) {
  if (!list || !reference) return null;
  const n = Math.min(list.length, reference.length);
  return spread(
    Array.from({ length: n }, (_, i) => list[i][field] / reference[i][field]).filter(
      Number.isFinite,
    ),
  );
}

function summarize(out, plan, samples) {
  const rows = [];
  const ratio = (s) => fmtSpread(s, fmtRatio);
  for (const load of plan) {
    const byTarget = {};
    const got = samples[load.key] ?? {};
    for (const target of load.targets) {
      const list = got[target] ?? [];
      if (list.length === 0) continue;
      const s = {
        rps: spread(list.map((x) => x.rps)),
        cpuUs: spread(list.map((x) => x.cpuUs)),
        cpuVsPipe: target === "direct" ? null : paired(list, got.pipe, "cpuUs"),
        cpuVsUndici: target === "direct" ? null : paired(list, got["undici-pipe"], "cpuUs"),
        cpuVsService: paired(list, got.service, "cpuUs"),
        rpsVsPipe: paired(list, got.pipe, "rps"),
        rpsVsUndici: paired(list, got["undici-pipe"], "rps"),
      };
      const p50Ms = median(list.map((x) => x.p50Ms));
      byTarget[target] = {
        rounds: list.length,
        rps: s.rps.median,
        p50Ms,
        p99Ms: median(list.map((x) => x.p99Ms)),
        cpuUsPerRequest: s.cpuUs.median,
        systemUsPerRequest: median(list.map((x) => x.systemUs)),
        cpuVsPipe: s.cpuVsPipe?.median ?? null,
        rpsVsPipe: s.rpsVsPipe?.median ?? null,
        failed: list.reduce((sum, x) => sum + x.failed, 0),
        spread: s,
        samples: list,
      };
    }
    const pipeP50 = byTarget.pipe?.p50Ms;
    for (const [target, figures] of Object.entries(byTarget)) {
      figures.p50OverPipeMs = pipeP50 === undefined ? null : figures.p50Ms - pipeP50;
      const s = figures.spread;
      rows.push([
        load.label,
        TARGET_LABELS[target],
        fmtSpread(s.rps),
        fmt(figures.p50Ms, 2),
        fmt(figures.p99Ms, 2),
        fmtSpread(s.cpuUs),
        ratio(s.cpuVsPipe),
        ratio(s.cpuVsUndici),
        ratio(s.rpsVsPipe),
        ratio(s.rpsVsUndici),
      ]);
    }
    out.figures.loads[load.key] = {
      label: load.label,
      concurrency: load.concurrency,
      targets: byTarget,
      vsBaseline: baselineFigures(got),
    };
  }
  const { loader, rounds, durationMs, warmupMs } = out.figures;
  out.figures.speed = speedSummary(probesByRound(samples));
  const notes = [
    `Load from ${loader === "wrk" ? "wrk (one thread)" : "the Node load generator (undici)"}; ${rounds} rounds of ${fmt(durationMs / 1000, 1)} s per target, after ${fmt(warmupMs / 1000, 1)} s of warm-up each.`,
    ...(out.figures.nginxMissing
      ? ["no nginx here (apt-get install nginx-light): its rows are left out"]
      : []),
    "Median over rounds (min–max). CPU µs/req is the middle process's CPU time over the requests it served (for direct: the fake channel's; nginx's from /proc, in 10 ms ticks). Ratios are taken round by round, against the pipe measured in the same round.",
    speedNote(out.figures.speed),
  ].filter(Boolean);
  out.tables = [
    {
      title: "Proxy: passthrough through the service, against a direct call and the bare pipes",
      columns: [
        "load",
        "target",
        "RPS",
        "p50 ms",
        "p99 ms",
        "CPU µs/req",
        "CPU vs node:http pipe",
        "CPU vs undici pipe",
        "RPS vs node:http pipe",
        "RPS vs undici pipe",
      ],
      rows,
      notes,
    },
    baselineTable(Object.values(out.figures.loads)),
  ].filter(Boolean);
  // The notes are the first table's own: the phase's would go under the last one.
  out.notes = [];
}

/**
 * The speed probe's readings by round (`probes[round]`), from every sample of the round: a
 * sample's place in its target's list is its round, and the together pairs come two a round.
 */
function probesByRound(samples) {
  const probes = [];
  for (const got of Object.values(samples)) {
    for (const [target, list] of Object.entries(got)) {
      list.forEach((sample, i) => {
        const round = target === "together" ? Math.floor(i / 2) : i;
        (probes[round] ??= []).push(sample.service?.probeMs ?? sample.probeMs);
      });
    }
  }
  return probes;
}

export function targets(figures) {
  const c1 = figures?.loads?.["chat-c1"]?.targets;
  const c64 = figures?.loads?.["chat-c64"]?.targets;
  const p50 = c1?.service?.p50OverPipeMs;
  const access = paired(c64?.service?.samples, c64?.["access-off"]?.samples, "cpuUs");
  return [
    {
      target:
        "access lines cost at most 1.1x the CPU of logging.access: false (chat, concurrency 64)",
      measured: access ? fmtSpread(access, fmtRatio) : "-",
      met: access ? access.median <= 1.1 : null,
    },
    {
      target: "median latency at concurrency 1 within 0.5 ms of the pipe's",
      measured: p50 == null ? "-" : `+${fmt(p50, 2)} ms`,
      met: p50 == null ? null : p50 <= 0.5,
    },
  ];
}
