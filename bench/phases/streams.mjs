// Streams: the fake channel sends STREAM_CHUNKS SSE events STREAM_GAP_MS apart, one write
// each. Through a proxy that passes a stream on as it comes they arrive as as many separate
// reads, about the same gap apart; a proxy that buffers coalesces them. Also the time to the
// first byte each proxy adds over a direct call. Streams run one at a time, interleaved
// across targets, read by the bench process itself (node:http, one read = one 'data' event).
import { Agent, request } from "node:http";
import { pick } from "../lib/mode.mjs";
import { STREAM_BODY } from "../lib/payloads.mjs";
import {
  JSON_HEADERS,
  startFakeChannel,
  startPipe,
  startService,
  serviceConfig,
} from "../lib/processes.mjs";
import { fmt, max, median, min } from "../lib/stats.mjs";

export const name = "streams";
export const deadlineSec = (options) => pick(options, { smoke: 20, quick: 40, full: 60 });

const CHUNKS = 20;
const GAP_MS = 20;
const LABELS = {
  direct: "direct to the channel",
  pipe: "bare node:http pipe",
  service: "service",
  baseline: "service (BASELINE)",
};

/** One streamed chat: when each read arrived, relative to sending the request. */
function probe(url, agent, signal) {
  return new Promise((resolve, reject) => {
    const target = new URL("/v1/chat/completions", url);
    const t0 = performance.now();
    const reads = [];
    const req = request(
      target,
      { method: "POST", agent, headers: JSON_HEADERS, signal, timeout: 10_000 },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`status ${res.statusCode} from ${url}`));
          return;
        }
        res.on("data", () => reads.push(performance.now() - t0));
        res.on("end", () => resolve(reads));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`stream from ${url} timed out`)));
    req.on("error", reject);
    req.end(STREAM_BODY);
  });
}

export async function run(ctx, out) {
  const perTarget = pick(ctx.options, { smoke: 2, quick: 4, full: 8 });
  const channel = await startFakeChannel(ctx, { streamChunks: CHUNKS, streamGapMs: GAP_MS });
  const [pipe, service, baseline] = await Promise.all([
    startPipe(ctx, channel.url),
    startService(ctx, serviceConfig({ channelUrl: channel.url })),
    ctx.options.baseline
      ? startService(ctx, serviceConfig({ channelUrl: channel.url }), { role: "baseline" })
      : undefined,
  ]);
  const targets = { direct: channel, pipe, service, ...(baseline ? { baseline } : {}) };
  const agent = new Agent({ keepAlive: true });
  const samples = Object.fromEntries(Object.keys(targets).map((target) => [target, []]));
  out.figures = { chunksSent: CHUNKS, gapMs: GAP_MS, targets: {} };
  try {
    for (const target of Object.values(targets)) await probe(target.url, agent, ctx.signal); // warm-up
    for (let i = 0; i < perTarget; i += 1) {
      for (const [target, { url }] of Object.entries(targets)) {
        ctx.check();
        samples[target].push(await probe(url, agent, ctx.signal));
      }
      summarize(out, samples);
    }
  } finally {
    agent.destroy();
  }
}

function summarize(out, samples) {
  const rows = [];
  const directTtfb = median(samples.direct.map((reads) => reads[0]));
  for (const [target, streams] of Object.entries(samples)) {
    if (streams.length === 0) continue;
    const gaps = streams.flatMap((reads) => reads.slice(1).map((t, i) => t - reads[i]));
    const counts = streams.map((reads) => reads.length);
    const ttfb = median(streams.map((reads) => reads[0]));
    const figures = {
      streams: streams.length,
      ttfbMs: ttfb,
      ttfbAddedMs: target === "direct" ? null : ttfb - directTtfb,
      readsMedian: median(counts),
      readsMin: min(counts),
      coalesced: counts.filter((count) => count < CHUNKS).length,
      gapMedianMs: median(gaps),
      gapMaxMs: max(gaps),
    };
    out.figures.targets[target] = figures;
    rows.push([
      LABELS[target],
      fmt(figures.streams),
      fmt(figures.ttfbMs, 2),
      figures.ttfbAddedMs === null ? "-" : fmt(figures.ttfbAddedMs, 2),
      `${fmt(figures.readsMedian)} (min ${fmt(figures.readsMin)})`,
      fmt(figures.coalesced),
      fmt(figures.gapMedianMs, 1),
      fmt(figures.gapMaxMs, 1),
    ]);
  }
  out.tables = [
    {
      title: `Streams: ${CHUNKS} SSE events sent ${GAP_MS} ms apart`,
      columns: [
        "target",
        "streams",
        "TTFB ms",
        "TTFB added ms",
        "reads per stream",
        "coalesced streams",
        "gap median ms",
        "gap max ms",
      ],
      rows,
    },
  ];
  out.notes = [
    "TTFB: from sending the request to the first body read; added: the median over the direct call's.",
    `A stream is coalesced when it arrives in fewer than ${CHUNKS} reads.`,
  ];
}

export function targets(figures) {
  const service = figures?.targets?.service;
  return [
    {
      target: "streams never coalesced (service)",
      measured: service
        ? `${service.coalesced} of ${service.streams} coalesced, min ${service.readsMin} reads`
        : "-",
      met: service ? service.coalesced === 0 : null,
    },
  ];
}
