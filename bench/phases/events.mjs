// Events: live task event streams (GET /v1/images/tasks/{id}/events) on two replicas on Redis.
//   watchers held  W streams open at once (half on each replica, two per task, on tasks whose
//                  channel never answers): how many the services count, the RSS they add
//                  (after a GC) and the CPU the services spend while only holding them, over a
//                  window that takes in one round of keep-alive comments (every 15 s);
//   bus delay      a task cancelled on replica A, watched on A and on B: from sending the
//                  cancel to the `image.task.failed` event at each watcher. B's minus A's is
//                  the hop over Redis pub/sub, measured while the W streams are held.
import { request } from "undici";
import {
  AUTH,
  JSON_HEADERS,
  startFakeChannel,
  startLoader,
  startService,
  serviceConfig,
} from "../lib/processes.mjs";
import { redisAvailable, REDIS_URL } from "../lib/redis-keys.mjs";
import { cpuMicros, fmt, median, MIB, sleep } from "../lib/stats.mjs";
import { pick } from "../lib/mode.mjs";
import { taskBody } from "../lib/payloads.mjs";

export const name = "events";
export const deadlineSec = (options) => pick(options, { smoke: 40, quick: 90, full: 240 });

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : null;
};

/** Opens a task's event stream; `until(name)` resolves when that event arrived (performance.now()). */
async function watch(origin, id, signal) {
  const res = await request(`${origin}/v1/images/tasks/${id}/events`, {
    headers: { ...AUTH, accept: "text/event-stream" },
    signal,
    bodyTimeout: 0,
  });
  if (res.statusCode !== 200) throw new Error(`events of ${id}: HTTP ${res.statusCode}`);
  const seen = new Map();
  const waiting = new Map();
  let buffer = "";
  (async () => {
    for await (const chunk of res.body) {
      buffer += chunk.toString("utf8");
      let end;
      while ((end = buffer.indexOf("\n\n")) !== -1) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.+)$/m.exec(block)?.[1];
        if (!event) continue;
        const at = performance.now();
        seen.set(event, at);
        waiting.get(event)?.(at);
      }
    }
  })().catch(() => undefined);
  return {
    until: (event) =>
      seen.has(event)
        ? Promise.resolve(seen.get(event))
        : new Promise((resolve) => waiting.set(event, resolve)),
    close: () => res.body.destroy(),
  };
}

async function submitSlow(origin) {
  const res = await request(`${origin}/v1/images/tasks`, {
    method: "POST",
    headers: JSON_HEADERS,
    body: taskBody("gpt-image-slow"),
  });
  const body = await res.body.json();
  if (res.statusCode !== 202)
    throw new Error(`submit: HTTP ${res.statusCode} ${JSON.stringify(body)}`);
  return body.id;
}

/** The services' own count of open streams (their /metrics). */
async function watchersOpen(origins) {
  let total = 0;
  for (const origin of origins) {
    const text = await (await request(`${origin}/metrics`)).body.text();
    total += Number(/^image_task_sidecar_task_event_watchers (\d+)/m.exec(text)?.[1] ?? 0);
  }
  return total;
}

async function busDelay(ctx, [a, b], count) {
  const sameReplica = [];
  const otherReplica = [];
  for (let i = 0; i < count; i += 1) {
    ctx.check();
    const id = await submitSlow(a);
    const controller = new AbortController();
    const [onA, onB] = await Promise.all([
      watch(a, id, controller.signal),
      watch(b, id, controller.signal),
    ]);
    await Promise.all([onA.until("image.task.queued"), onB.until("image.task.queued")]).catch(
      () => undefined,
    );
    // Whichever stage it is in, the first event came; now the cancel.
    const sent = performance.now();
    const cancel = await request(`${a}/v1/images/tasks/${id}/cancel`, {
      method: "POST",
      headers: AUTH,
    });
    await cancel.body.text();
    const [atA, atB] = await Promise.all([
      onA.until("image.task.failed"),
      onB.until("image.task.failed"),
    ]);
    sameReplica.push(atA - sent);
    otherReplica.push(atB - sent);
    controller.abort();
  }
  return { sameReplica, otherReplica };
}

export async function run(ctx, out) {
  const size = (values) => pick(ctx.options, values);
  out.figures = {};
  if (!(await redisAvailable())) {
    out.notes.push(`no Redis at ${REDIS_URL}: the events phase needs one and was skipped`);
    return;
  }
  const tasks = size({ smoke: 20, quick: 500, full: 1000 });
  // A minute: each window then takes in the same periodic work (one adoption round, two
  // stalled-job checks, four lease renewals; four keep-alive rounds while holding), which a
  // shorter window would catch or miss by chance.
  const windowMs = size({ smoke: 1000, quick: 15_000, full: 60_000 });
  const settleMs = size({ smoke: 200, full: 3000 });
  const delays = size({ smoke: 5, quick: 20, full: 40 });
  const channel = await startFakeChannel(ctx);
  const loader = await startLoader(ctx);
  const base = serviceConfig({
    channelUrl: channel.url,
    storeUrl: REDIS_URL,
    prefix: ctx.redisPrefix("events"),
  });
  // Every stream comes from one address with one key: the per-client bounds would cap them.
  const config = {
    ...base,
    server: { ...base.server, maxConnectionsPerIp: 1_000_000 },
    events: { maxStreamsPerKey: 1_000_000, maxStreams: 1_000_000 },
  };
  const services = [await startService(ctx, config), await startService(ctx, config)];
  const origins = services.map((service) => service.url);

  // Tasks whose channel never answers: their streams stay open until the phase ends.
  const submitted = await loader.run({
    origins,
    requests: [
      {
        path: "/v1/images/tasks",
        method: "POST",
        headers: JSON_HEADERS,
        body: taskBody("gpt-image-slow"),
      },
    ],
    concurrency: 16,
    count: tasks,
    collectIds: true,
    timeoutMs: Math.max(1000, ctx.remainingMs() / 3),
  });
  const ids = submitted.ids ?? [];
  ctx.log(`events: ${ids.length} slow tasks submitted`);
  // The services' own CPU with the tasks and no stream (BullMQ's checks, lease renewals), once
  // the submissions' own work has settled. Both windows start and end with a GC, so each
  // holds the same work besides its streams, and RSS is compared after the same quiet time.
  const gcAll = () => Promise.all(services.map((service) => service.gc()));
  await sleep(settleMs);
  const idleStart = await gcAll();
  await sleep(windowMs);
  const idle = await gcAll();
  const idleCpu = idle.reduce((sum, s, i) => sum + cpuMicros(idleStart[i], s), 0);

  // Two streams per task: one on each replica (the loader sends path i to origin i mod 2).
  const paths = ids.flatMap((id) => [
    `/v1/images/tasks/${id}/events`,
    `/v1/images/tasks/${id}/events`,
  ]);
  const holdMs = Math.max(5000, ctx.remainingMs() - 15_000);
  const holding = loader.hold({
    origins,
    paths,
    headers: { ...AUTH, accept: "text/event-stream" },
    holdMs,
  });
  holding.catch(() => undefined);
  let open = 0;
  for (let i = 0; i < 100 && open < paths.length; i += 1) {
    await sleep(200);
    open = await watchersOpen(origins);
  }
  ctx.log(`events: ${open} of ${paths.length} streams open`);
  await sleep(settleMs);
  const held = await gcAll();
  await sleep(windowMs);
  const after = await gcAll();
  const rssAdded = after.reduce((sum, s, i) => sum + s.memory.rss - idle[i].memory.rss, 0);
  const cpu = after.reduce((sum, s, i) => sum + cpuMicros(held[i], s), 0);
  out.figures.watchers = {
    opened: paths.length,
    open,
    rssAddedMiB: rssAdded / MIB,
    rssPerWatcherKiB: open ? rssAdded / 1024 / open : null,
    cpuMsPerSecIdle: idleCpu / 1000 / (windowMs / 1000),
    cpuMsPerSecHolding: cpu / 1000 / (windowMs / 1000),
    cpuMsPerSecAdded: (cpu - idleCpu) / 1000 / (windowMs / 1000),
    windowMs,
  };
  summarize(out);

  const { sameReplica, otherReplica } = await busDelay(ctx, origins, delays);
  out.figures.busDelay = {
    count: sameReplica.length,
    sameP50Ms: percentile(sameReplica, 0.5),
    sameP95Ms: percentile(sameReplica, 0.95),
    otherP50Ms: percentile(otherReplica, 0.5),
    otherP95Ms: percentile(otherReplica, 0.95),
    hopMs: median(otherReplica.map((ms, i) => ms - sameReplica[i])),
  };
  summarize(out);
  await loader.release();
  await Promise.all(services.map((service) => service.stop()));
}

function summarize(out) {
  const w = out.figures.watchers;
  const d = out.figures.busDelay;
  out.tables = [
    {
      title: "Events: task event streams held on 2 replicas (Redis)",
      columns: [
        "streams",
        "open",
        "RSS added MiB",
        "KiB/stream",
        "CPU ms/s without",
        "CPU ms/s holding",
        "added",
      ],
      rows: [
        [
          fmt(w?.opened),
          fmt(w?.open),
          fmt(w?.rssAddedMiB, 1),
          fmt(w?.rssPerWatcherKiB, 1),
          fmt(w?.cpuMsPerSecIdle, 2),
          fmt(w?.cpuMsPerSecHolding, 2),
          fmt(w?.cpuMsPerSecAdded, 2),
        ],
      ],
    },
  ];
  if (d) {
    out.tables.push({
      title: "Events: from a cancel sent to replica A to the failed event at a watcher",
      columns: ["watcher on", "p50 ms", "p95 ms"],
      rows: [
        ["A (same replica)", fmt(d.sameP50Ms, 1), fmt(d.sameP95Ms, 1)],
        ["B (over Redis pub/sub)", fmt(d.otherP50Ms, 1), fmt(d.otherP95Ms, 1)],
        ["B minus A (median)", fmt(d.hopMs, 1), "-"],
      ],
    });
  }
  out.notes = [
    `Streams on tasks whose channel never answers, two per task (one on each replica). RSS after a GC at the end of each window, against the same services before the streams; CPU of both services over a ${fmt((w?.windowMs ?? 60_000) / 1000)} s window (GC at both ends), without the streams and while holding them, each after a few seconds to settle.`,
    "Bus delay measured while the streams above are held, one task at a time.",
  ];
}

export function targets(figures) {
  const w = figures?.watchers;
  const d = figures?.busDelay;
  return [
    {
      target: "1,000s of event streams held cheaply (< 50 KiB each, < 5 ms/s CPU per 1,000)",
      measured: w
        ? `${fmt(w.open)} open: ${fmt(w.rssPerWatcherKiB, 1)} KiB each, ${fmt(w.cpuMsPerSecAdded, 2)} ms/s added`
        : "-",
      met:
        w?.open >= 1000
          ? w.rssPerWatcherKiB < 50 && w.cpuMsPerSecAdded / (w.open / 1000) < 5
          : null,
    },
    {
      target: "an event reaches a watcher on another replica within 50 ms (p95)",
      measured: d ? `${fmt(d.otherP95Ms, 1)} ms (same replica ${fmt(d.sameP95Ms, 1)} ms)` : "-",
      met: d ? d.otherP95Ms < 50 : null,
    },
  ];
}
