// Tasks: the async image-task API on each store. Every setup's services run from the start,
// and rounds are interleaved (each round measures every setup, in an order that turns), so that
// drift hits them alike; figures are medians over rounds with their spread. Per setup a round:
//   submissions  POST /v1/images/tasks at concurrency 32 for the round's time, the fake
//                channel answering at once (tiny PNG); then until the last of them finished.
//                CPU per task: the service processes' CPU (all replicas) from the first
//                submission until the last task finished, over the tasks: what a submission
//                costs the service end to end, whatever part of the runs fell in the window
//                (CPU per submit, in the window only, is printed too);
//   polls        GET /v1/images/tasks/{id} on the round's finished tasks;
//   chat         on the memory store (and BASELINE's), a chat passthrough on the same
//                service, to compare a poll's cost with it round by round.
// Every setup keeps its images in files in one memory-backed folder (/dev/shm, where there is
// one): the stores are compared, not the image stores (the memory phase measures those). On
// this kind of VM a new file's inode on ext4 without a journal costs 20 µs to 0.9 ms of kernel
// CPU, by how many files were deleted near it in the last minutes: the setups with images on
// disk paid it, and by the order the rounds ran in.
// After the rounds, once per setup: waits held, W concurrent GET ...?wait=30 on tasks whose
// channel never answers: how many are still held after a while, the RSS they add and the CPU
// while holding them. Then, on SQLite and Redis, the same submissions and polls on a store that
// already holds 1,000 and 100,000 finished tasks of the key (BENCH_HELD=1000,100000; filled
// through the build's own store code before the service starts): whether a write costs more as
// tasks pile up.
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { measureHeldTasks } from "../lib/held-tasks.mjs";
import { pick } from "../lib/mode.mjs";
import { CHAT_BODY, taskBody } from "../lib/payloads.mjs";
import {
  AUTH,
  JSON_HEADERS,
  startFakeChannel,
  startLoader,
  startService,
  serviceConfig,
} from "../lib/processes.mjs";
import { TMPFS } from "../lib/real-size.mjs";
import { redisAvailable, REDIS_URL } from "../lib/redis-keys.mjs";
import { cpuMicros, fmt, fmtRatio, MIB, sleep } from "../lib/stats.mjs";
import { summarize } from "../lib/tasks-report.mjs";
import { waitFinished } from "../lib/task-client.mjs";

export const name = "tasks";

const SETUPS = [
  { key: "memory", label: "memory", replicas: 1, chat: true },
  { key: "sqlite", label: "SQLite", replicas: 1 },
  // A chat on the Redis setups too: on three replicas against one, it is what three processes
  // sharing the core cost with no task work at all (the passthrough never reads Redis).
  { key: "redis-1", label: "Redis, 1 replica", replicas: 1, redis: true, chat: true },
  { key: "redis-3", label: "Redis, 3 replicas", replicas: 3, redis: true, chat: true },
  { key: "memory-baseline", label: "memory (BASELINE)", replicas: 1, chat: true, baseline: true },
  {
    key: "redis-1-baseline",
    label: "Redis, 1 replica (BASELINE)",
    replicas: 1,
    redis: true,
    baseline: true,
  },
];

/** Stores measured with many tasks held, and how many (BENCH_HELD overrides). */
const HELD_SETUPS = [
  { key: "sqlite", label: "SQLite" },
  { key: "redis-1", label: "Redis, 1 replica", redis: true },
];
const heldCounts = (options) =>
  (process.env.BENCH_HELD ?? pick(options, { quick: "100,1000", full: "1000,100000" }))
    .split(",")
    .map(Number);

const submitRequest = (model) => ({
  path: "/v1/images/tasks",
  method: "POST",
  headers: JSON_HEADERS,
  body: taskBody(model),
});
const chatRequest = {
  path: "/v1/chat/completions",
  method: "POST",
  headers: JSON_HEADERS,
  body: CHAT_BODY,
};

function settings(options) {
  return {
    rounds: options.rounds,
    // Two thirds of a round: each round runs three loads per setup, and the tasks' runs.
    durationMs: Math.round((options.roundSec * 1000 * 2) / 3),
    warmup: pick(options, { smoke: 20, quick: 100, full: 200 }),
    waits: pick(options, { smoke: 20, quick: 300, full: 1000 }),
    holdMs: pick(options, { smoke: 500, quick: 1000, full: 2000 }),
    steadyMs: pick(options, { smoke: 300, quick: 1000, full: 1500 }),
  };
}

export function deadlineSec(options) {
  const { rounds, durationMs } = settings(options);
  const setups = options.baseline ? 6 : 4;
  // A round of a setup: submissions, their runs (up to twice as long), polls, a chat.
  const perRound = setups * ((durationMs / 1000) * 5 + 2);
  return Math.round(pick(options, { smoke: 90, quick: 120, full: 200 }) + rounds * perRound);
}

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

/** Where every setup's images go: a folder of the run's own, in memory where there is one. */
const imagesRoot = (ctx) =>
  existsSync(TMPFS) ? join(TMPFS, `${ctx.runId}-tasks`) : join(ctx.tempDir, "task-images");

/** Starts a setup's services (every replica on the same store and prefix), images in `imagesDir`. */
async function startSetup(ctx, setup, channel, imagesDir) {
  const storeUrl = setup.redis
    ? REDIS_URL
    : setup.key === "sqlite"
      ? `sqlite://${join(ctx.tempDir, `tasks-${setup.key}.db`)}`
      : "memory://";
  const config = serviceConfig({
    channelUrl: channel.url,
    storeUrl,
    prefix: setup.redis ? ctx.redisPrefix(setup.key) : undefined,
    // As shipped: access and task lines at info, on every setup and on BASELINE alike.
    logging: { level: "info" },
  });
  config.images = { url: `file://${join(imagesDir, setup.key)}` };
  const services = await Promise.all(
    Array.from({ length: setup.replicas }, () =>
      startService(ctx, config, {
        role: setup.baseline ? "baseline" : "service",
        label: setup.key,
      }),
    ),
  );
  return { setup, services, origins: services.map((service) => service.url) };
}

/**
 * Warm-up: a few submissions, polls and chats, as many per replica as a setup of one replica
 * gets (each replica's code is optimised by its own JIT, on its own share of the submissions).
 */
async function warmUp(ctx, { setup, origins }, warmup) {
  const timeoutMs = Math.max(1000, ctx.remainingMs() - 2000);
  const warm = await ctx.loader.run({
    origins,
    requests: [submitRequest()],
    concurrency: 4,
    count: warmup * setup.replicas,
    collectIds: true,
    timeoutMs,
  });
  const ids = warm.ids ?? [];
  if (ids.length === 0)
    throw new Error(`${setup.label}: no task was accepted (${JSON.stringify(warm.statuses)})`);
  await waitFinished(origins[0], ids.at(-1), {
    signal: ctx.signal,
    deadline: Date.now() + timeoutMs,
  });
  await ctx.loader.run({
    origins,
    requests: ids.map((id) => ({ path: `/v1/images/tasks/${id}`, headers: AUTH })),
    concurrency: 8,
    count: warmup * 2,
    timeoutMs,
  });
  if (setup.chat) {
    await ctx.loader.run({
      origins,
      requests: [chatRequest],
      concurrency: 8,
      count: warmup * 2,
      timeoutMs,
    });
  }
}

/** One round of one setup: submissions (until their tasks finished), polls, a chat. */
async function measureRound(ctx, { setup, services, origins }, durationMs) {
  const timeoutMs = () => Math.max(1000, ctx.remainingMs() - 2000);
  const sample = {};
  const before = await totalStats(services);
  const submitted = await ctx.loader.run({
    origins,
    requests: [submitRequest()],
    concurrency: 32,
    durationMs,
    collectIds: true,
    timeoutMs: timeoutMs(),
  });
  const inWindow = await totalStats(services);
  const startedAt = Date.now() - submitted.seconds * 1000;
  const ids = submitted.ids ?? [];
  if (ids.length === 0)
    throw new Error(`${setup.label}: no task was accepted (${JSON.stringify(submitted.statuses)})`);
  const last = await waitFinished(origins[0], ids.at(-1), {
    signal: ctx.signal,
    deadline: Date.now() + timeoutMs(),
  });
  const finished = await totalStats(services);
  sample.submissions = {
    requests: submitted.ok,
    perSec: submitted.rps,
    p50Ms: submitted.p50Ms,
    p99Ms: submitted.p99Ms,
    cpuUsPerRequest: cpuMicros(before, inWindow) / submitted.ok,
    cpuUsPerTask: cpuMicros(before, finished) / ids.length,
    completedPerSec: ids.length / ((Date.now() - startedAt) / 1000),
    lastStatus: last.status,
    statuses: submitted.statuses,
  };
  sample.polls = await timed(ctx, services, {
    origins,
    requests: ids.slice(0, 2000).map((id) => ({ path: `/v1/images/tasks/${id}`, headers: AUTH })),
    concurrency: 32,
    durationMs,
    timeoutMs: timeoutMs(),
  });
  if (setup.chat) {
    sample.chat = await timed(ctx, services, {
      origins,
      requests: [chatRequest],
      concurrency: 32,
      durationMs,
      timeoutMs: timeoutMs(),
    });
  }
  return sample;
}

/** A load job and the services' CPU per request over it. */
async function timed(ctx, services, job) {
  const before = await totalStats(services);
  const result = await ctx.loader.run(job);
  const after = await totalStats(services);
  return {
    requests: result.ok,
    perSec: result.rps,
    p50Ms: result.p50Ms,
    cpuUsPerRequest: cpuMicros(before, after) / result.ok,
    statuses: result.statuses,
  };
}

/** Waits held at once on tasks that never finish: how many stay held, their RSS and CPU. */
async function measureWaits(ctx, { services, origins }, { waits, holdMs, steadyMs }) {
  const slow = await ctx.loader.run({
    origins,
    requests: [submitRequest("gpt-image-slow")],
    concurrency: 32,
    count: waits,
    collectIds: true,
    // Bounded: on a store whose submissions slow down as tasks pile up, fewer waits.
    timeoutMs: Math.min(10_000, Math.max(1000, ctx.remainingMs() - 2000)),
  });
  const idle = await totalStats(services);
  const held = await ctx.loader.hold({
    origins,
    paths: slow.ids.map((id) => `/v1/images/tasks/${id}?wait=30`),
    headers: AUTH,
    holdMs,
  });
  const holding = await totalStats(services);
  await sleep(steadyMs);
  const steady = await totalStats(services);
  await ctx.loader.release();
  return {
    opened: held.opened,
    held: held.opened - held.answered - held.errors,
    answeredEarly: held.answered,
    errors: held.errors,
    rssMiB: steady.rss / MIB,
    rssAddedMiB: (steady.rss - idle.rss) / MIB,
    // CPU spent while nothing but the waits was going on, in ms per second.
    cpuMsPerSecHolding: cpuMicros(holding, steady) / 1000 / (steadyMs / 1000),
  };
}

export async function run(ctx, out) {
  const { options } = ctx;
  const plan = settings(options);
  const channel = await startFakeChannel(ctx);
  ctx.loader = await startLoader(ctx);
  const haveRedis = await redisAvailable();
  const imagesDir = imagesRoot(ctx);
  out.figures = { ...plan, setups: {}, samples: {}, notes: [] };
  if (!haveRedis) out.figures.notes.push(`no Redis at ${REDIS_URL}: the Redis setups were skipped`);
  out.figures.notes.push(
    `every setup's images in files under ${imagesDir.startsWith(TMPFS) ? `${TMPFS} (memory-backed)` : "the run's temp folder"}: the task stores are compared, not the image stores`,
  );
  const setups = SETUPS.filter(
    (setup) => (!setup.redis || haveRedis) && (!setup.baseline || options.baseline),
  );
  const running = await Promise.all(
    setups.map((setup) => startSetup(ctx, setup, channel, imagesDir)),
  );
  for (const entry of running) {
    ctx.check();
    await warmUp(ctx, entry, plan.warmup);
    ctx.log(`tasks: ${entry.setup.label} warmed up`);
  }
  for (let round = 0; round < plan.rounds; round += 1) {
    const order = running.map((_, i) => running[(i + round) % running.length]);
    for (const entry of order) {
      ctx.check();
      const sample = await measureRound(ctx, entry, plan.durationMs);
      (out.figures.samples[entry.setup.key] ??= []).push(sample);
    }
    summarize(out, setups);
    ctx.log(`tasks: round ${round + 1}/${plan.rounds} done`);
  }
  for (const entry of running) {
    ctx.check();
    out.figures.setups[entry.setup.key].waits = await measureWaits(ctx, entry, plan);
    summarize(out, setups);
    await Promise.all(entry.services.map((service) => service.stop()));
  }
  await rm(imagesDir, { recursive: true, force: true });
  out.figures.held = [];
  await measureHeldTasks(ctx, {
    channel,
    loader: ctx.loader,
    setups: HELD_SETUPS.filter((setup) => haveRedis || !setup.redis),
    counts: heldCounts(options),
    durationMs: plan.durationMs,
    submitRequest: submitRequest(),
    onRow: (row) => {
      out.figures.held.push(row);
      summarize(out, setups);
    },
  });
}

export function targets(figures) {
  const sqlite = figures?.setups?.sqlite;
  const held = (figures?.held ?? []).filter((row) => row.label === "SQLite");
  const growth = held.length >= 2 ? held.at(-1).writeCpuUs / held[0].writeCpuUs : null;
  const redis = figures?.setups?.["redis-1"]?.submissions?.perSec?.median;
  const redis3 = figures?.setups?.["redis-3"]?.submissions?.perSec?.median;
  const sqliteRate = sqlite?.submissions?.perSec?.median;
  const sqlitePoll = sqlite?.polls?.cpuUsPerRequest?.median;
  return [
    {
      target: "SQLite (the embedded default) at least 1,000 submissions/s",
      measured: sqliteRate == null ? "-" : `${fmt(sqliteRate)}/s`,
      met: sqliteRate == null ? null : sqliteRate >= 1000,
    },
    {
      target: "SQLite: a poll under 300 µs of CPU",
      measured: sqlitePoll == null ? "-" : `${fmt(sqlitePoll)} µs`,
      met: sqlitePoll == null ? null : sqlitePoll < 300,
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
