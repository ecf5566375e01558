// The performance targets, one line each, from the figures of the phases that measure them:
// the figure, its ratio to the target's reference (median over rounds, taken round by round),
// the ratio's spread (min–max over rounds) and, for the passthrough, the same ratio counted in
// instructions (callgrind, concurrency 1). A target is met when the median is; "spread
// crosses" says the rounds fell on both sides of the limit (a closer look is needed).
import { freshSpreads } from "./fresh-start.mjs";
import { HOLD } from "./real-size.mjs";
import { fmt, fmtRatio, fmtSpread, MIB } from "./stats.mjs";

const LIMIT_MB = 200;

/** "met" / "not met", or null without a figure; `crosses` when the spread straddles the limit. */
function judge(s, limit, atMost = true) {
  if (!s) return { met: null, crosses: false };
  const ok = (value) => (atMost ? value <= limit : value >= limit);
  return { met: ok(s.median), crosses: ok(s.min) !== ok(s.max) };
}

function spreadText(s, format = (v) => fmt(v, 2)) {
  if (!s) return "-";
  if (s.n < 2) return "one round";
  const [low, high] = [format(s.min), format(s.max)];
  return low === high ? `${low} (all rounds)` : `${low}–${high}`;
}

/** A line for a ratio target: `s` the ratio's spread, `limit` the target. */
function ratioLine({ target, s, limit, atMost = true, measured, instructions, baseline }) {
  const verdict = judge(s, limit, atMost);
  return {
    issue: true,
    target,
    measured: [measured, baseline ? `BASELINE ${fmtRatio(baseline.median)}` : ""]
      .filter(Boolean)
      .join("; "),
    ratio: s ? fmtRatio(s.median) : "-",
    spread: spreadText(s),
    instructions: instructions
      ? `${fmtRatio(instructions.median)} (${spreadText(instructions)})`
      : "-",
    ...verdict,
  };
}

const us = (s) => (s ? `${fmt(s.median)} µs` : "-");
const rps = (s) => (s ? `${fmt(s.median)}/s` : "-");

function proxyLines(proxy, instructions) {
  const load = (key) => proxy?.loads?.[key]?.targets ?? {};
  // Counts of another request (BENCH_CALLGRIND_REQUEST) or store (BENCH_CALLGRIND_STORE) are not
  // the chat's on memory the targets name.
  const chatOnMemory =
    (instructions?.request ?? "chat") === "chat" && (instructions?.store ?? "memory") === "memory";
  const counted = chatOnMemory ? (instructions?.targets ?? {}) : {};
  const c64 = load("chat-c64");
  const c1 = load("chat-c1");
  const responses = load("responses-c16");
  const edits = load("edits-c4");
  const cpu = (t) => t?.spread?.cpuUs;
  return [
    ratioLine({
      target: "chat, concurrency 64: CPU per request vs the undici pipe <= 1.15x",
      s: c64.service?.spread?.cpuVsUndici,
      limit: 1.15,
      measured: `${us(cpu(c64.service))} vs ${us(cpu(c64["undici-pipe"]))}`,
      instructions: counted.service?.vsUndici,
      baseline: c64.baseline?.spread?.cpuVsUndici,
    }),
    ratioLine({
      target: "chat, concurrency 64: RPS vs the undici pipe >= 0.9x",
      s: c64.service?.spread?.rpsVsUndici,
      limit: 0.9,
      atMost: false,
      measured: `${rps(c64.service?.spread?.rps)} vs ${rps(c64["undici-pipe"]?.spread?.rps)}`,
      baseline: c64.baseline?.spread?.rpsVsUndici,
    }),
    ratioLine({
      target: "chat, concurrency 1: CPU per request vs the bare pipe (node:http) <= 1.15x",
      s: c1.service?.spread?.cpuVsPipe,
      limit: 1.15,
      measured: `${us(cpu(c1.service))} vs ${us(cpu(c1.pipe))}`,
      instructions: counted.service?.vsPipe,
      baseline: c1.baseline?.spread?.cpuVsPipe,
    }),
    ratioLine({
      target: "/v1/responses, concurrency 16: CPU per request vs the bare pipe (node:http) <= 1.2x",
      s: responses.service?.spread?.cpuVsPipe,
      limit: 1.2,
      measured: `${us(cpu(responses.service))} vs ${us(cpu(responses.pipe))}`,
      baseline: responses.baseline?.spread?.cpuVsPipe,
    }),
    ratioLine({
      target: `multipart edit (${proxy?.loads?.["edits-c4"]?.label?.match(/\d+ KB/)?.[0] ?? "300 KB"} form), concurrency 4: CPU per request vs the bare pipe (node:http) <= 1.3x`,
      s: edits.service?.spread?.cpuVsPipe,
      limit: 1.3,
      measured: `${us(cpu(edits.service))} vs ${us(cpu(edits.pipe))}`,
      baseline: edits.baseline?.spread?.cpuVsPipe,
    }),
    ratioLine({
      target: "tracing on (every request sampled), chat, concurrency 64: CPU vs untraced <= 1.3x",
      s: c64.traced?.spread?.cpuVsService,
      limit: 1.3,
      measured: `${us(cpu(c64.traced))} vs ${us(cpu(c64.service))}`,
      instructions: counted.traced?.vsService,
    }),
  ];
}

function taskLines(tasks) {
  const f = tasks?.setups ?? {};
  const perTask = (key) => f[key]?.submissions?.cpuUsPerTask;
  return [
    ratioLine({
      target:
        "poll of a finished task vs a chat passthrough (CPU per request, memory store) <= 0.7x",
      s: tasks?.pollVsChat,
      limit: 0.7,
      measured: `${us(f.memory?.polls?.cpuUsPerRequest)} vs ${us(f.memory?.chat?.cpuUsPerRequest)}`,
      baseline: f["memory-baseline"]?.pollVsChat,
    }),
    ratioLine({
      target: "Redis, 1 replica: CPU per submission <= 1.2x the memory store's",
      s: tasks?.redis1VsMemory,
      limit: 1.2,
      measured: `${us(perTask("redis-1"))} vs ${us(perTask("memory"))} per task`,
      baseline: tasks?.redis1VsMemoryBaseline,
    }),
    ratioLine({
      target: "Redis, 3 replicas: CPU per submission <= 1.3x one replica's",
      s: tasks?.redis3VsRedis1,
      limit: 1.3,
      measured: [
        `${us(perTask("redis-3"))} vs ${us(perTask("redis-1"))} per task`,
        tasks?.redis3VsRedis1Chat
          ? `a chat on the same replicas ${fmtRatio(tasks.redis3VsRedis1Chat.median)} one's (three processes on one core)`
          : "",
      ]
        .filter(Boolean)
        .join("; "),
    }),
  ];
}

function memoryLines(memory) {
  const setups = memory?.setups ?? {};
  const lines = [];
  for (const key of HOLD) {
    const x = setups[key];
    if (!x?.cpuMsPerTask) continue;
    const s = x.cpuMsPerTask;
    lines.push({
      ...ratioLine({
        target: `real-size task (3 MB PNG, url), ${x.label}: service CPU per task <= 10 ms`,
        s: scaled(s, 1 / 10),
        limit: 1,
        measured: `${fmtSpread(s, (v) => fmt(v, 1))} ms`,
      }),
    });
  }
  lines.push(...freshLines(memory?.fresh, memory?.malloc));
  const tuned = memory?.malloc;
  for (const key of HOLD) {
    const x = setups[key];
    const mib = x?.rssEstimated ?? x?.rssHeld;
    if (!mib) continue;
    const line = ratioLine({
      target: `10,000 finished real-size tasks, ${x.label}: RSS < 200 MB without allocator tuning`,
      s: scaled(mib, MIB / 1e6 / LIMIT_MB),
      limit: 1,
      measured: `${fmt(mbOf(mib.median))} MB${x.rssEstimated ? ` (est. from ${fmt(x.held)} tasks)` : ""}${tuned ? `, with MALLOC_MMAP_THRESHOLD_=${tuned}` : ""}`,
    });
    // Only a run that held (or estimated) 10,000 tasks without tuning can tell.
    if (tuned || memory.tasks !== 10_000) line.met = null;
    lines.push(line);
  }
  return lines;
}

/**
 * The issue's own check: real-size tasks on Redis from a fresh start (fresh-start.mjs), judged
 * on the median over its rounds.
 */
function freshLines(fresh, tuned) {
  if (!fresh?.rounds?.length) return [];
  const s = freshSpreads(fresh);
  const what = `${fmt(fresh.tasks)} real-size tasks from a fresh start, Redis, default image directory`;
  const cpu = ratioLine({
    target: `${what}: service CPU per task <= 10 ms`,
    s: scaled(s.cpuMsPerTask, 1 / 10),
    limit: 1,
    measured: `${fmtSpread(s.cpuMsPerTask, (v) => fmt(v, 1))} ms (first ${fmt(Math.min(fresh.step, fresh.tasks))}: ${fmt(s.stepMsPerTask[0], 1)} ms)`,
  });
  const rss = ratioLine({
    target: `${what}: RSS after them < 200 MB without allocator tuning`,
    s: scaled(s.rssAfterMiB, MIB / 1e6 / LIMIT_MB),
    limit: 1,
    measured: `${fmtSpread(s.rssAfterMiB, (v) => fmt(mbOf(v)))} MB (before: ${fmt(mbOf(s.rssBeforeMiB.median))} MB)`,
  });
  if (tuned) rss.met = null;
  // A run with failed tasks measured something else.
  if (fresh.rounds.some((r) => r.failed > 0)) cpu.met = rss.met = null;
  return [cpu, rss];
}

/** MiB as the targets' MB. */
const mbOf = (mib) => (mib * MIB) / 1e6;

/** A spread with every figure times `factor`. */
const scaled = (s, factor) => ({
  median: s.median * factor,
  min: s.min * factor,
  max: s.max * factor,
  n: s.n,
});

/**
 * The target lines, in the order of the performance issue, from the figures of the phases
 * that ran (a line whose phase did not run is left out; one whose figure is missing says n/a).
 */
export function issueTargets(phases) {
  const figures = (name) => phases[name]?.figures;
  return [
    ...(phases.proxy ? proxyLines(figures("proxy"), figures("instructions")) : []),
    ...(phases.tasks ? taskLines(figures("tasks")) : []),
    ...(phases.memory ? memoryLines(figures("memory")) : []),
  ];
}
