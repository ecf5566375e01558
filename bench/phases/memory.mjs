// Memory and image weight: what real-size tasks cost (the fake channel answers 1024x1024 PNGs
// of noise, ~3 MB each), per task store and image store, the service without allocator tuning
// (no MALLOC_MMAP_THRESHOLD_; BENCH_MALLOC_MMAP_THRESHOLD sets one, 131072 as the Docker image).
//
// 1. Throughput: every setup's service runs from the start; in interleaved rounds (each round
//    every setup, in an order that turns), N url tasks submitted at once, then until all are
//    finished: submissions/s, completions/s and the service's CPU per task (median over
//    rounds, min–max). Then the task store's bytes per finished task: Redis, the sum of
//    MEMORY USAGE over the setup's keys; SQLite, the pages in use; over the tasks it holds.
//    "Redis, images on tmpfs" is a file:// image store in memory-backed /dev/shm (its I/O at
//    memory speed, no heap to collect): the baseline the image stores' cost on the Redis path
//    is measured against. "Redis, memory images" keeps the bytes on the service's own heap.
// 2. Holding: each setup with an image store in its own service, side by side; submissions
//    carry `Prefer: wait=30` (no backlog) and stop at COUNT tasks or after the window. RSS
//    after a GC before, right after, and held (read several times while idle: median and
//    spread); when the window ends first, the RSS for COUNT tasks is estimated from what each
//    held task costs the heap. Then retention expires them: RSS after expiry, and the objects
//    left in the image store.
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { startChild } from "../lib/children.mjs";
import {
  FRESH_CONCURRENCY,
  freshFigures,
  freshRounds,
  freshTasks,
  measureFreshStarts,
} from "../lib/fresh-start.mjs";
import { pick } from "../lib/mode.mjs";
import { startFakeChannel, startLoader } from "../lib/processes.mjs";
import {
  allocatorEnv,
  HOLD,
  place,
  SETUPS,
  startOn,
  storeBytes,
  submitJob,
  TMPFS,
  treeSize,
} from "../lib/real-size.mjs";
import { redisAvailable, REDIS_URL } from "../lib/redis-keys.mjs";
import { cpuMicros, fmt, MIB, ratio, sleep, spread } from "../lib/stats.mjs";
import { getTask, waitFinished, waitGone } from "../lib/task-client.mjs";
import { summarize } from "../lib/memory-report.mjs";

export const name = "memory";

function settings(options) {
  return {
    rounds: options.rounds,
    tasksPerRound: pick(options, { smoke: 4, quick: 20, full: 60 }),
    tasks: pick(options, { smoke: 40, full: 10_000 }),
    retentionSec: pick(options, { smoke: 5, quick: 45, full: 100 }),
    windowMs: pick(options, { smoke: 3000, quick: 20_000, full: 70_000 }),
    settleMs: pick(options, { smoke: 0, quick: 6000, full: 15_000 }),
  };
}

export function deadlineSec(options) {
  const { rounds, tasksPerRound, retentionSec, windowMs, settleMs } = settings(options);
  // About 60 ms a task for 5 setups (real-size images, on one core), then the hold and expiry.
  const throughputSec = rounds * tasksPerRound * 5 * 0.06 + 30;
  const holdSec = (windowMs + settleMs) / 1000 + retentionSec + Math.min(60, retentionSec) + 30;
  // Each fresh start: its service's start, then about 25 ms a task.
  const freshSec = (20 + freshTasks(options) * 0.025) * freshRounds(options);
  return Math.round((throughputSec + holdSec + freshSec) * 1.5);
}

export async function run(ctx, out) {
  const plan = settings(ctx.options);
  const channel = await startFakeChannel(ctx, { realImages: true });
  const loader = await startLoader(ctx);
  const s3 = (await startChild("s3-server.mjs", [], { group: ctx.group })).ready;
  const haveRedis = await redisAvailable();
  const haveTmpfs = existsSync(TMPFS);
  const setups = SETUPS.filter(
    (setup) => (setup.store !== "redis" || haveRedis) && (setup.images !== "tmpfs" || haveTmpfs),
  );
  const malloc = allocatorEnv().MALLOC_MMAP_THRESHOLD_;
  out.figures = { ...plan, malloc: malloc ?? null, setups: {} };
  out.notes = [
    "Every image is a 1024x1024 PNG of noise (3.0 MiB; 4 MiB as base64), as gpt-image models answer; url tasks, n=1.",
    `Throughput: ${plan.rounds} interleaved rounds of ${plan.tasksPerRound} tasks per setup submitted at once (32 at a time), maxConcurrent 16; median (min–max) over rounds. "store B/task" is the task store's bytes per finished task (Redis: MEMORY USAGE over the setup's keys; SQLite: the pages in use).`,
    `Fresh start: a new service on Redis, its images in data/images under its folder (where the default ./data/images puts them, on disk), ${fmt(freshTasks(ctx.options))} url tasks with Prefer: wait=60, ${FRESH_CONCURRENCY} at a time, from its first task (no warm-up); CPU per task over all of them and per step; RSS without a forced GC. ${fmt(freshRounds(ctx.options))} round(s), each a new service; the targets read the median over rounds.`,
    `Held: submissions with Prefer: wait=30 until ${fmt(plan.tasks)} tasks or the window; RSS after a GC (held: median and spread of readings while idle); retentionSec ${plan.retentionSec}. ${malloc ? `The service runs with MALLOC_MMAP_THRESHOLD_=${malloc} (BENCH_MALLOC_MMAP_THRESHOLD).` : "The service runs without allocator tuning (no MALLOC_MMAP_THRESHOLD_)."}`,
  ];
  if (!haveRedis) out.notes.push(`no Redis at ${REDIS_URL}: the Redis setups were skipped`);
  for (const setup of setups) out.figures.setups[setup.key] = { label: setup.label, samples: [] };
  summarize(out, setups);

  // First, on a machine the phase has not loaded yet: the issue's own check, from a fresh start.
  if (haveRedis) {
    out.figures.fresh = freshFigures(ctx.options);
    await measureFreshStarts(ctx, { channel, loader }, out.figures.fresh);
    summarize(out, setups);
  }
  // The issue's own check alone, in a minute or two (BENCH_FRESH_ONLY=1): the rest is skipped.
  if (process.env.BENCH_FRESH_ONLY === "1") return;
  await throughput(ctx, out, setups, { channel, loader, s3, plan });
  const held = setups.filter((setup) => HOLD.includes(setup.key));
  await Promise.all(
    held.map((setup) => hold(ctx, out, setup, { channel, loader, s3, setups, plan })),
  );
  summarize(out, setups);
}

/** Starts a setup's service for the throughput rounds (SQLite: its empty size read first). */
async function startRate(ctx, setup, { channel, loader, s3 }) {
  const where = place(ctx, setup, "rate", s3);
  const sqlite = setup.store === "sqlite";
  const options = { retentionSec: 3600, label: setup.key };
  // SQLite's file belongs to the running service: its empty size is read from a first start.
  if (sqlite) await (await startOn(ctx, channel, where, options)).stop();
  const storeEmpty = sqlite ? await storeBytes(where) : 0;
  const service = await startOn(ctx, channel, where, options);
  const warm = await loader.run({ ...submitJob(service, "url", 30), count: 4, timeoutMs: 60_000 });
  return { setup, where, service, storeEmpty, finished: warm.ids?.length ?? 0 };
}

/** One round of one setup: N tasks submitted at once, until all are finished. */
async function rateRound(ctx, entry, { loader, plan }) {
  const { service } = entry;
  const deadline = () => ctx.deadline - 5000;
  const cpuBefore = await service.stats();
  const startedAt = Date.now();
  const submitted = await loader.run({
    ...submitJob(service, "url"),
    count: plan.tasksPerRound,
    timeoutMs: Math.max(1000, Math.min(120_000, deadline() - Date.now())),
  });
  const ids = submitted.ids ?? [];
  if (ids.length === 0) throw new Error(`${entry.setup.label}: no task accepted`);
  for (const id of ids)
    await waitFinished(service.url, id, { signal: ctx.signal, deadline: deadline() });
  entry.finished += ids.length;
  return {
    submissionsPerSec: ids.length / submitted.seconds,
    completionsPerSec: ids.length / ((Date.now() - startedAt) / 1000),
    // The service's own CPU per task (not the S3 server's or the disk's).
    cpuMsPerTask: cpuMicros(cpuBefore, await service.stats()) / 1000 / ids.length,
  };
}

async function throughput(ctx, out, setups, deps) {
  const entries = [];
  try {
    for (const setup of setups) {
      ctx.check();
      entries.push(await startRate(ctx, setup, deps));
    }
    for (let round = 0; round < deps.plan.rounds; round += 1) {
      const order = entries.map((_, i) => entries[(i + round) % entries.length]);
      for (const entry of order) {
        ctx.check();
        const sample = await rateRound(ctx, entry, deps);
        out.figures.setups[entry.setup.key].samples.push(sample);
      }
      summarize(out, setups);
      ctx.log(`memory: throughput round ${round + 1}/${deps.plan.rounds} done`);
    }
    for (const entry of entries) await weigh(out, entry);
  } finally {
    await Promise.all(entries.map((entry) => entry.service.stop()));
    // Their images are of no more use: the hold gets the disk (and the tmpfs its memory).
    await Promise.all(
      entries.map((entry) => rm(entry.where.dir, { recursive: true, force: true })),
    );
  }
}

/** The task store's and the image store's bytes per finished task. */
async function weigh(out, { setup, where, service, storeEmpty, finished }) {
  const figures = out.figures.setups[setup.key];
  if (finished === 0) return;
  if (setup.store === "sqlite") await service.stop();
  figures.storeBytesPerTask = ((await storeBytes(where)) - storeEmpty) / finished;
  if (setup.images === "file" || setup.images === "tmpfs") {
    figures.imageBytesPerTask = (await treeSize(join(where.dir, "images"))).bytes / finished;
  }
}

/** Memory readings after a GC, `everyMs` apart, until `until` (at least one). */
async function rssReadings(service, until, everyMs, signal) {
  const readings = [];
  do {
    readings.push((await service.gc()).memory);
    if (Date.now() + everyMs > until || signal.aborted) break;
    await sleep(everyMs);
  } while (Date.now() < until);
  return readings;
}

async function hold(ctx, out, setup, { channel, loader, s3, setups, plan }) {
  const figures = out.figures.setups[setup.key];
  const { tasks: count, retentionSec, windowMs, settleMs } = plan;
  const where = place(ctx, setup, "hold", s3);
  const service = await startOn(ctx, channel, where, { retentionSec, label: `${setup.key}-hold` });
  try {
    const deadline = () => ctx.deadline - 3000;
    const firstExpiry = Date.now() + retentionSec * 1000;
    const job = submitJob(service, "url", 30);
    const warm = await loader.run({ ...job, count: 10, timeoutMs: 30_000 });
    // The service drops its idle decode buffers a second after the last task: not counted here.
    await sleep(1500);
    const before = await service.gc();
    figures.rssBeforeMiB = before.memory.rss / MIB;
    const submitted = await loader.run({
      ...job,
      count: count - (warm.ids?.length ?? 0),
      timeoutMs: Math.max(1000, Math.min(windowMs, deadline() - Date.now())),
    });
    const ids = [...(warm.ids ?? []), ...(submitted.ids ?? [])];
    figures.held = ids.length;
    if (ids.length === 0) throw new Error(`${setup.label}: no task accepted`);
    await waitFinished(service.url, ids.at(-1), { signal: ctx.signal, deadline: deadline() });
    figures.allHeld = (await getTask(service.url, ids[0], { signal: ctx.signal })).status === 200;
    figures.rssBurstMiB = (await service.gc()).memory.rss / MIB;
    const settleUntil = Math.min(Date.now() + settleMs, firstExpiry - 5000, deadline());
    // Half the settling time idle, then readings over the other half.
    await sleep(Math.max(0, (settleUntil - Date.now()) / 2));
    const readings = await rssReadings(service, settleUntil, 1500, ctx.signal);
    const last = readings.at(-1);
    figures.rssHeld = spread(readings.map((m) => m.rss / MIB));
    figures.rssHeldMiB = figures.rssHeld.median;
    const heldBytes = (m) => m.heapUsed + m.arrayBuffers;
    const perTask = (heldBytes(last) - heldBytes(before.memory)) / (submitted.ids?.length || 1);
    figures.heapPerTaskKiB = perTask / 1024;
    if (ids.length < count) {
      const extra = (Math.max(0, perTask) * (count - ids.length)) / MIB;
      figures.rssEstimated = {
        ...figures.rssHeld,
        median: figures.rssHeld.median + extra,
        min: figures.rssHeld.min + extra,
        max: figures.rssHeld.max + extra,
      };
      figures.rssEstimatedMiB = figures.rssEstimated.median;
    }
    if (setup.images === "file") {
      figures.imageFilesHeld = (await treeSize(join(where.dir, "images"))).files;
    }
    summarize(out, setups);
    ctx.log(
      `memory: ${setup.label}: ${ids.length} tasks held, waiting for retention to expire them`,
    );
    const expired = await waitGone(service.url, ids.at(-1), {
      signal: ctx.signal,
      deadline: deadline(),
      everyMs: 1000,
    });
    // One sweep interval (retentionSec, at most a minute) for the sweep to take them out.
    const sweptBy = Math.min(deadline(), Date.now() + Math.min(60, retentionSec) * 1000 + 2000);
    while (expired && Date.now() < sweptBy && !ctx.signal.aborted) {
      if (setup.images === "file" && (await treeSize(join(where.dir, "images"))).files === 0) break;
      await sleep(1000);
    }
    figures.expired = expired;
    figures.rssAfterExpiryMiB = (await service.gc()).memory.rss / MIB;
    if (setup.images === "file") {
      figures.imageFilesAfterExpiry = (await treeSize(join(where.dir, "images"))).files;
    }
  } finally {
    await service.stop();
  }
}

export function targets(figures) {
  const setups = figures?.setups ?? {};
  const rows = [];
  for (const x of Object.values(setups)) {
    if (x.storeBytesPerTask === undefined) continue;
    rows.push({
      target: `${x.label}: task store under 2 KB per finished task`,
      measured: `${fmt(x.storeBytesPerTask)} B`,
      met: x.storeBytesPerTask < 2048,
    });
  }
  const baseline = setups["redis-tmpfs"]?.completionsPerSec?.median;
  const baselineCpu = setups["redis-tmpfs"]?.cpuMsPerTask?.median;
  for (const key of ["redis-file", "redis-s3"]) {
    const share = ratio(setups[key]?.completionsPerSec?.median, baseline);
    if (share === null) continue;
    const cpu = ratio(setups[key]?.cpuMsPerTask?.median, baselineCpu);
    rows.push({
      target: `${setups[key].label}: the image store costs the Redis path under 20 % of its completions/s`,
      measured: `${fmt(share * 100)} % of Redis with images on tmpfs (service CPU/task ${fmt(cpu, 2)}x)`,
      met: share > 0.8,
    });
  }
  return rows;
}
