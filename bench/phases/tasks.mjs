// Tasks: the async image-task API on each store. For every store setup:
//   submissions/s  POST /v1/images/tasks, the fake channel answering at once (tiny PNG);
//   completed/s    from the first submission until the last of them is finished;
//   polls/s        GET /v1/images/tasks/{id} on finished tasks;
//   waits held     W concurrent GET ...?wait=30 on tasks whose channel never answers: how many
//                  are still held after a while, and the service's RSS and CPU while holding.
// CPU per request is the service processes' CPU (all replicas) over requests served. On the
// memory store a chat passthrough is measured too, to compare a poll's cost with it.
// Setups: memory, SQLite, Redis with one replica, Redis with three (load round-robin).
// Then, on SQLite and Redis, the same submissions and polls on a store that already holds
// 1,000 and 100,000 finished tasks of the same key (BENCH_HELD=1000,100000; filled through
// the build's own store code before the service starts): whether a write costs more as tasks
// pile up.
import { join } from "node:path";
import { measureHeldTasks } from "../lib/held-tasks.mjs";
import { CHAT_BODY, taskBody } from "../lib/payloads.mjs";
import {
  AUTH,
  JSON_HEADERS,
  startFakeChannel,
  startLoader,
  startService,
  serviceConfig,
} from "../lib/processes.mjs";
import { redisAvailable, REDIS_URL } from "../lib/redis-keys.mjs";
import { cpuMicros, fmt, fmtRatio, MIB, ratio, sleep } from "../lib/stats.mjs";
import { waitFinished } from "../lib/task-client.mjs";

export const name = "tasks";
export const deadlineSec = ({ quick }) => (quick ? 60 : 330);

const SETUPS = [
  { key: "memory", label: "memory", replicas: 1 },
  { key: "sqlite", label: "SQLite", replicas: 1 },
  { key: "redis-1", label: "Redis, 1 replica", replicas: 1, redis: true },
  { key: "redis-3", label: "Redis, 3 replicas", replicas: 3, redis: true },
];

/** Stores measured with many tasks held, and how many (BENCH_HELD overrides). */
const HELD_SETUPS = [
  { key: "sqlite", label: "SQLite" },
  { key: "redis-1", label: "Redis, 1 replica", redis: true },
];
const heldCounts = (quick) =>
  (process.env.BENCH_HELD ?? (quick ? "100,1000" : "1000,100000")).split(",").map(Number);

const submitRequest = (model) => ({
  path: "/v1/images/tasks",
  method: "POST",
  headers: JSON_HEADERS,
  body: taskBody(model),
});

async function totalStats(services) {
  const all = await Promise.all(services.map((service) => service.stats()));
  return {
    cpu: {
      user: all.reduce((sum, s) => sum + s.cpu.user, 0),
      system: all.reduce((sum, s) => sum + s.cpu.system, 0),
    },
    rss: all.reduce((sum, s) => sum + s.memory.rss, 0),
  };
}

export async function run(ctx, out) {
  const { quick } = ctx.options;
  const durationMs = quick ? 200 : 1500;
  const waits = quick ? 20 : 1000;
  const channel = await startFakeChannel(ctx);
  const loader = await startLoader(ctx);
  const haveRedis = await redisAvailable();
  out.figures = { durationMs, waits, setups: {} };
  if (!haveRedis) out.notes.push(`no Redis at ${REDIS_URL}: the Redis setups were skipped`);

  for (const setup of SETUPS) {
    if (setup.redis && !haveRedis) continue;
    ctx.check();
    const storeUrl = setup.redis
      ? REDIS_URL
      : setup.key === "sqlite"
        ? `sqlite://${join(ctx.tempDir, `tasks-${Date.now()}.db`)}`
        : "memory://";
    const config = serviceConfig({
      channelUrl: channel.url,
      storeUrl,
      prefix: setup.redis ? ctx.redisPrefix(setup.key) : undefined,
    });
    const services = [];
    for (let i = 0; i < setup.replicas; i += 1) services.push(await startService(ctx, config));
    const origins = services.map((service) => service.url);
    const figures = { label: setup.label, replicas: setup.replicas };
    out.figures.setups[setup.key] = figures;
    const timeoutMs = () => Math.max(1000, ctx.remainingMs() - 2000);
    const setupStarted = Date.now();
    const step = (what) =>
      ctx.log(`tasks: ${setup.label}: ${what} (${Date.now() - setupStarted} ms)`);
    step("started");

    // Warm-up: a few of each call.
    await loader.run({
      origins,
      requests: [submitRequest()],
      concurrency: 4,
      count: 40,
      timeoutMs: timeoutMs(),
    });

    // Submissions.
    let before = await totalStats(services);
    const submitted = await loader.run({
      origins,
      requests: [submitRequest()],
      concurrency: 32,
      durationMs,
      collectIds: true,
      timeoutMs: timeoutMs(),
    });
    let after = await totalStats(services);
    const started = Date.now() - submitted.seconds * 1000;
    figures.submissions = {
      requests: submitted.ok,
      perSec: submitted.rps,
      p50Ms: submitted.p50Ms,
      p99Ms: submitted.p99Ms,
      cpuUsPerRequest: cpuMicros(before, after) / submitted.ok,
      statuses: submitted.statuses,
    };
    summarize(out);
    const ids = submitted.ids;
    if (!ids?.length)
      throw new Error(
        `${setup.label}: no task was accepted (${JSON.stringify(submitted.statuses)})`,
      );

    step("submitted");
    // Every submitted task finished: the run's throughput end to end.
    const last = await waitFinished(origins[0], ids.at(-1), {
      signal: ctx.signal,
      deadline: Date.now() + timeoutMs(),
    });
    figures.completedPerSec = ids.length / ((Date.now() - started) / 1000);
    figures.lastTaskStatus = last.status;

    step("finished");
    // Polls on finished tasks.
    const polled = ids.slice(0, 2000);
    before = await totalStats(services);
    const polls = await loader.run({
      origins,
      requests: polled.map((id) => ({ path: `/v1/images/tasks/${id}`, headers: AUTH })),
      concurrency: 32,
      durationMs,
      timeoutMs: timeoutMs(),
    });
    after = await totalStats(services);
    figures.polls = {
      requests: polls.ok,
      perSec: polls.rps,
      p50Ms: polls.p50Ms,
      p99Ms: polls.p99Ms,
      cpuUsPerRequest: cpuMicros(before, after) / polls.ok,
      statuses: polls.statuses,
    };

    // A chat passthrough on the same service, for the poll's cost against it.
    if (setup.key === "memory") {
      before = await totalStats(services);
      const chat = await loader.run({
        origins,
        requests: [
          { path: "/v1/chat/completions", method: "POST", headers: JSON_HEADERS, body: CHAT_BODY },
        ],
        concurrency: 32,
        durationMs,
        timeoutMs: timeoutMs(),
      });
      after = await totalStats(services);
      figures.chat = { perSec: chat.rps, cpuUsPerRequest: cpuMicros(before, after) / chat.ok };
    }
    summarize(out);

    step("polled");
    // Waits held at once, on tasks that never finish.
    ctx.check();
    const slow = await loader.run({
      origins,
      requests: [submitRequest("gpt-image-slow")],
      concurrency: 32,
      count: waits,
      collectIds: true,
      // Bounded: on a store whose submissions slow down as tasks pile up, fewer waits.
      timeoutMs: Math.min(quick ? 3000 : 10_000, timeoutMs()),
    });
    const holdMs = quick ? 500 : 2000;
    step("slow tasks submitted");
    const idle = await totalStats(services);
    const held = await loader.hold({
      origins,
      paths: slow.ids.map((id) => `/v1/images/tasks/${id}?wait=30`),
      headers: AUTH,
      holdMs,
    });
    const holding = await totalStats(services);
    await sleep(quick ? 300 : 1500);
    const steady = await totalStats(services);
    const stillHeld = held.opened - held.answered - held.errors;
    figures.waits = {
      opened: held.opened,
      held: stillHeld,
      answeredEarly: held.answered,
      errors: held.errors,
      rssMiB: steady.rss / MIB,
      rssAddedMiB: (steady.rss - idle.rss) / MIB,
      // CPU spent while nothing but the waits was going on, in ms per second.
      cpuMsPerSecHolding: cpuMicros(holding, steady) / 1000 / ((quick ? 300 : 1500) / 1000),
    };
    await loader.release();
    summarize(out);
    ctx.log(`tasks: ${setup.label} done (${JSON.stringify(figures.waits)})`);
    await Promise.all(services.map((service) => service.stop()));
  }
  out.figures.held = [];
  await measureHeldTasks(ctx, {
    channel,
    loader,
    setups: HELD_SETUPS.filter((setup) => haveRedis || !setup.redis),
    counts: heldCounts(quick),
    durationMs,
    submitRequest: submitRequest(),
    onRow: (row) => {
      out.figures.held.push(row);
      summarize(out);
    },
  });
}

function summarize(out) {
  const rows = [];
  for (const figures of Object.values(out.figures.setups)) {
    const s = figures.submissions;
    const p = figures.polls;
    const w = figures.waits;
    rows.push([
      figures.label,
      fmt(s?.perSec),
      fmt(s?.cpuUsPerRequest),
      fmt(figures.completedPerSec),
      fmt(p?.perSec),
      fmt(p?.cpuUsPerRequest),
      w ? `${fmt(w.held)} of ${fmt(w.opened)}` : "-",
      fmt(w?.rssAddedMiB, 1),
      fmt(w?.cpuMsPerSecHolding, 1),
    ]);
  }
  const memory = out.figures.setups.memory;
  out.figures.pollVsChat = ratio(memory?.polls?.cpuUsPerRequest, memory?.chat?.cpuUsPerRequest);
  out.tables = [
    {
      title: "Tasks: submissions, polls and held waits per store",
      columns: [
        "store",
        "submits/s",
        "CPU µs/submit",
        "completed/s",
        "polls/s",
        "CPU µs/poll",
        "waits held",
        "RSS added MiB",
        "CPU ms/s holding",
      ],
      rows,
    },
  ];
  if (memory?.chat) {
    out.tables.push({
      title:
        "Tasks: a poll against a chat passthrough (memory store, same service, concurrency 32)",
      columns: ["request", "per second", "CPU µs/request", "vs chat"],
      rows: [
        ["chat passthrough", fmt(memory.chat.perSec), fmt(memory.chat.cpuUsPerRequest), "1.00x"],
        [
          "poll of a finished task",
          fmt(memory.polls.perSec),
          fmt(memory.polls.cpuUsPerRequest),
          fmtRatio(out.figures.pollVsChat),
        ],
      ],
    });
  }
  if (out.figures.held?.length) {
    out.tables.push({
      title: "Tasks: submissions and polls on a store that holds many finished tasks of the key",
      columns: [
        "store",
        "tasks held",
        "store CPU µs/task written",
        "submits/s",
        "CPU µs/submit",
        "polls/s",
        "CPU µs/poll",
      ],
      rows: out.figures.held.map((row) => [
        row.label,
        fmt(row.held),
        fmt(row.writeCpuUs),
        fmt(row.submissions.perSec),
        fmt(row.submissions.cpuUsPerRequest),
        fmt(row.polls?.perSec),
        fmt(row.polls?.cpuUsPerRequest),
      ]),
    });
  }
  out.notes = [
    "CPU is the service processes' own (all replicas), over the requests they served.",
    "Store CPU µs/task written: the store code's own CPU (create + transition, in the bench process, as the build writes them) over 1,000 tasks written once the store held that many; on Redis without the server's.",
    "Waits held: GETs with ?wait=30 still open after a while, on tasks whose channel never answers; RSS added over the idle service, CPU while only holding them.",
  ];
}

export function targets(figures) {
  const sqlite = figures?.setups?.sqlite;
  const held = (figures?.held ?? []).filter((row) => row.label === "SQLite");
  const growth = held.length >= 2 ? ratio(held.at(-1).writeCpuUs, held[0].writeCpuUs) : null;
  const poll = figures?.pollVsChat;
  const redis = figures?.setups?.["redis-1"]?.submissions?.perSec;
  const redis3 = figures?.setups?.["redis-3"]?.submissions?.perSec;
  return [
    {
      target: "a poll cheaper than a chat passthrough (CPU per request)",
      measured: poll == null ? "-" : fmtRatio(poll),
      met: poll == null ? null : poll < 1,
    },
    {
      target: "SQLite (the embedded default) at least 1,000 submissions/s",
      measured: sqlite?.submissions ? `${fmt(sqlite.submissions.perSec)}/s` : "-",
      met: sqlite?.submissions ? sqlite.submissions.perSec >= 1000 : null,
    },
    {
      target: "SQLite: a poll under 300 µs of CPU",
      measured: sqlite?.polls ? `${fmt(sqlite.polls.cpuUsPerRequest)} µs` : "-",
      met: sqlite?.polls ? sqlite.polls.cpuUsPerRequest < 300 : null,
    },
    {
      target:
        "SQLite: the store's CPU per task written does not grow with tasks held (within 1.3x)",
      measured:
        growth == null
          ? "-"
          : `${fmt(held.at(-1).held)} vs ${fmt(held[0].held)} held: ${fmtRatio(growth)}`,
      met: growth == null ? null : growth <= 1.3,
    },
    {
      target: "Redis task throughput at least 1,000 submissions/s",
      measured: redis == null ? "-" : `${fmt(redis)}/s (3 replicas: ${fmt(redis3)}/s)`,
      met: redis == null ? null : Math.max(redis, redis3 ?? 0) >= 1000,
    },
  ];
}
