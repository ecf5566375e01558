// Proxy: what the service costs on the passthrough routes, side by side with a direct call to
// the same fake channel and with the bare node:http pipe (the floor for any Node proxy); for
// chat also the same pipe with undici as its client (what the HTTP client alone costs).
// Rounds are interleaved (each round measures every load on every target), so that drift on
// the shared machine hits every target alike; medians over rounds are reported.
import { CHAT_BODY, RESPONSES_BODY, editForm } from "../lib/payloads.mjs";
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
import { cpuMicros, fmt, fmtRatio, median, min, ratio } from "../lib/stats.mjs";
import { startTraceSink } from "../lib/trace-sink.mjs";

export const name = "proxy";
export const deadlineSec = ({ quick }) => (quick ? 25 : 240);

const TARGET_LABELS = {
  direct: "direct to the channel",
  pipe: "bare node:http pipe",
  "undici-pipe": "bare undici pipe",
  service: "service",
  "access-off": "service, logging.access: false",
  traced: "service, tracing on",
  baseline: "service (BASELINE)",
};

function loads(quick) {
  const form = editForm(quick ? 32 : 300);
  return [
    {
      key: "chat-c1",
      label: "chat, ~1 KB answer, concurrency 1",
      concurrency: 1,
      request: {
        path: "/v1/chat/completions",
        method: "POST",
        headers: JSON_HEADERS,
        body: CHAT_BODY,
      },
      targets: ["direct", "pipe", "undici-pipe", "service", "access-off", "traced", "baseline"],
    },
    {
      key: "chat-c64",
      label: "chat, ~1 KB answer, concurrency 64",
      concurrency: 64,
      request: {
        path: "/v1/chat/completions",
        method: "POST",
        headers: JSON_HEADERS,
        body: CHAT_BODY,
      },
      targets: ["direct", "pipe", "undici-pipe", "service", "access-off", "traced", "baseline"],
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
      targets: ["pipe", "service", "baseline"],
    },
    {
      key: "edits-c4",
      label: `/v1/images/edits, ${Math.round(form.body.length / 1024)} KB form, concurrency 4`,
      concurrency: 4,
      request: {
        path: "/v1/images/edits",
        method: "POST",
        headers: { ...AUTH, "content-type": form.contentType },
        bodyBase64: form.body.toString("base64"),
      },
      targets: ["pipe", "service", "baseline"],
    },
  ];
}

export async function run(ctx, out) {
  const { quick } = ctx.options;
  const rounds = quick ? 1 : 3;
  const durationMs = quick ? 100 : 1200;
  const channel = await startFakeChannel(ctx);
  const traces = await startTraceSink(ctx);
  // As shipped: access lines at info. Beside it, the same without them, and with tracing on.
  const logged = (access) =>
    serviceConfig({ channelUrl: channel.url, logging: { level: "info", access } });
  const [pipe, undiciPipe, service, accessOff, traced, baseline, loader] = await Promise.all([
    startPipe(ctx, channel.url),
    startUndiciPipe(ctx, channel.url),
    startService(ctx, logged(true)),
    startService(ctx, logged(false), { role: "access-off" }),
    startService(ctx, logged(true), {
      role: "traced",
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: traces.url },
    }),
    ctx.options.baseline
      ? startService(ctx, serviceConfig({ channelUrl: channel.url }), { role: "baseline" })
      : undefined,
    startLoader(ctx),
  ]);
  const targets = {
    direct: channel,
    pipe,
    "undici-pipe": undiciPipe,
    service,
    "access-off": accessOff,
    traced,
    ...(baseline ? { baseline } : {}),
  };
  // BENCH_LOADS=edits-c4,chat-c64 measures only those loads (to profile one of them).
  const only = process.env.BENCH_LOADS?.split(",").filter(Boolean);
  const plan = loads(quick)
    .filter((load) => !only?.length || only.includes(load.key))
    .map((load) => ({
      ...load,
      targets: load.targets.filter((target) => targets[target]),
    }));
  const samples = {}; // samples[load][target] = [{rps, p50Ms, p99Ms, cpuUs}]
  out.figures = { rounds, durationMs, loads: {} };

  const measure = async (load, target, ms) => {
    const proc = targets[target];
    const before = await proc.stats();
    const result = await loader.run({
      origins: [proc.url],
      requests: [load.request],
      concurrency: load.concurrency,
      durationMs: ms,
      timeoutMs: ms + 20_000,
    });
    const after = await proc.stats();
    if (result.ok === 0)
      throw new Error(
        `${load.key} via ${target}: no request succeeded (${JSON.stringify(result.statuses)}, ${result.errors} errors)`,
      );
    return {
      rps: result.rps,
      p50Ms: result.p50Ms,
      p99Ms: result.p99Ms,
      cpuUs: cpuMicros(before, after) / result.ok,
      failed: result.requests - result.ok,
    };
  };

  // Warm-up: JIT, sockets, keep-alive pools. Two seconds a target: with less, the optimizing
  // compiler was still at work on the service (its threads count in its CPU) in the first round.
  for (const load of plan)
    for (const target of load.targets) await measure(load, target, quick ? 20 : 2000);

  for (let round = 0; round < rounds; round += 1) {
    for (const load of plan) {
      for (const target of load.targets) {
        ctx.check();
        const sample = await measure(load, target, durationMs);
        ((samples[load.key] ??= {})[target] ??= []).push(sample);
      }
    }
    summarize(out, plan, samples);
    ctx.log(`proxy: round ${round + 1}/${rounds} done`);
  }
}

function summarize(out, plan, samples) {
  const rows = [];
  for (const load of plan) {
    const byTarget = {};
    for (const target of load.targets) {
      const list = samples[load.key]?.[target] ?? [];
      if (list.length === 0) continue;
      byTarget[target] = {
        rounds: list.length,
        rps: median(list.map((s) => s.rps)),
        p50Ms: median(list.map((s) => s.p50Ms)),
        p99Ms: median(list.map((s) => s.p99Ms)),
        cpuUsPerRequest: median(list.map((s) => s.cpuUs)),
        // Other processes only ever add CPU time: the least disturbed round.
        cpuUsPerRequestLeast: min(list.map((s) => s.cpuUs)),
        failed: list.reduce((sum, s) => sum + s.failed, 0),
      };
    }
    const pipe = byTarget.pipe;
    for (const [target, figures] of Object.entries(byTarget)) {
      figures.cpuVsPipe =
        target === "direct" ? null : ratio(figures.cpuUsPerRequest, pipe?.cpuUsPerRequest);
      figures.rpsVsPipe = ratio(figures.rps, pipe?.rps);
      figures.p50OverPipeMs = pipe ? figures.p50Ms - pipe.p50Ms : null;
      rows.push([
        load.label,
        TARGET_LABELS[target],
        fmt(figures.rps),
        fmt(figures.p50Ms, 2),
        fmt(figures.p99Ms, 2),
        fmt(figures.cpuUsPerRequest),
        fmtRatio(figures.cpuVsPipe),
        fmtRatio(figures.rpsVsPipe),
      ]);
    }
    out.figures.loads[load.key] = {
      label: load.label,
      concurrency: load.concurrency,
      targets: byTarget,
    };
  }
  out.tables = [
    {
      title: "Proxy: passthrough through the service, against a direct call and the bare pipe",
      columns: [
        "load",
        "target",
        "RPS",
        "p50 ms",
        "p99 ms",
        "CPU µs/req",
        "CPU vs pipe",
        "RPS vs pipe",
      ],
      rows,
    },
  ];
  out.notes = [
    "CPU µs/req is the middle process's CPU time over the requests it served (for direct: the fake channel's).",
  ];
}

export function targets(figures) {
  const c1 = figures?.loads?.["chat-c1"]?.targets;
  const c64 = figures?.loads?.["chat-c64"]?.targets;
  const cpu = c64?.service?.cpuVsPipe;
  const rps = c64?.service?.rpsVsPipe;
  const p50 = c1?.service?.p50OverPipeMs;
  const access = ratio(c64?.service?.cpuUsPerRequest, c64?.["access-off"]?.cpuUsPerRequest);
  return [
    {
      target:
        "access lines cost at most 1.1x the CPU of logging.access: false (chat, concurrency 64)",
      measured: access == null ? "-" : fmtRatio(access),
      met: access == null ? null : access <= 1.1,
    },
    {
      target: "CPU per request within 2x of the bare pipe's (chat, concurrency 64)",
      measured: cpu == null ? "-" : fmtRatio(cpu),
      met: cpu == null ? null : cpu <= 2,
    },
    {
      target: "RPS at concurrency 64 at least 80% of the pipe's",
      measured: rps == null ? "-" : `${fmt(rps * 100)}%`,
      met: rps == null ? null : rps >= 0.8,
    },
    {
      target: "median latency at concurrency 1 within 0.5 ms of the pipe's",
      measured: p50 == null ? "-" : `+${fmt(p50, 2)} ms`,
      met: p50 == null ? null : p50 <= 0.5,
    },
  ];
}
