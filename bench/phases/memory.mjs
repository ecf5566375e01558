// Memory and image weight: what finished tasks cost to hold when every image is real-size (the
// fake channel answers 1024x1024 PNGs of noise, ~3 MB each), per task store and image store.
//
// 1. Throughput, one setup at a time (so they do not share the cores): N url tasks submitted
//    at once (submissions/s until every 202), then until all are finished (completions/s).
//    Then the task store's bytes per finished task: Redis, the sum of MEMORY USAGE over the
//    run's keys; SQLite, the file's growth; divided by the tasks it holds. "Redis, images on
//    tmpfs" is a file:// image store in memory-backed /dev/shm (its I/O at memory speed, no
//    heap to collect): the baseline the image stores' cost on the Redis path is measured
//    against. "Redis, memory images" keeps the bytes on the service's own heap.
// 2. Holding: each setup with an image store in its own service, side by side; submissions
//    carry `Prefer: wait=30` (no backlog) and stop at COUNT tasks or after the window. RSS
//    after a GC before, right after, and held (after some idle time); when the window ends
//    first, the RSS for COUNT tasks is estimated from what each held task costs the heap.
//    Then retention expires them: RSS after expiry, and the objects left in the image store.
import { existsSync } from "node:fs";
import { readdir, rm, stat } from "node:fs/promises";
import Database from "better-sqlite3";
import { join } from "node:path";
import { taskBody } from "../lib/payloads.mjs";
import { startChild } from "../lib/children.mjs";
import {
  JSON_HEADERS,
  startFakeChannel,
  startLoader,
  startService,
  serviceConfig,
} from "../lib/processes.mjs";
import { prefixMemory, redisAvailable, REDIS_URL } from "../lib/redis-keys.mjs";
import { cpuMicros, fmt, MIB, ratio, sleep } from "../lib/stats.mjs";
import { getTask, waitFinished, waitGone } from "../lib/task-client.mjs";

export const name = "memory";
export const deadlineSec = ({ quick }) => (quick ? 90 : 420);

const SETUPS = [
  { key: "sqlite-file", label: "SQLite, file images", store: "sqlite", images: "file" },
  { key: "redis-tmpfs", label: "Redis, images on tmpfs", store: "redis", images: "tmpfs" },
  { key: "redis-memory", label: "Redis, memory images", store: "redis", images: "memory" },
  { key: "redis-file", label: "Redis, file images", store: "redis", images: "file" },
  { key: "redis-s3", label: "Redis, S3 images (s3rver)", store: "redis", images: "s3" },
];
/** The baseline of the image stores' cost on the Redis path. */
const BASELINE = "redis-tmpfs";
/** Memory-backed, where there is one (Linux): the tmpfs setup is skipped elsewhere. */
const TMPFS = "/dev/shm";
/** What is held for the RSS figures: every setup with a real image store. */
const HOLD = ["sqlite-file", "redis-file", "redis-s3"];

/** Bytes of the files under `dir`, and how many. */
async function treeSize(dir) {
  let bytes = 0;
  let files = 0;
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    // A file the sweep deletes while it is counted is not there any more.
    const info = await stat(join(entry.parentPath ?? entry.path, entry.name)).catch(
      () => undefined,
    );
    if (!info) continue;
    files += 1;
    bytes += info.size;
  }
  return { bytes, files };
}

/** A setup's store and image store, under names of its own (`tag`: throughput or hold). */
function place(ctx, setup, tag, s3) {
  const dir =
    setup.images === "tmpfs"
      ? join(TMPFS, `${ctx.runId}-${setup.key}-${tag}`)
      : join(ctx.tempDir, `${setup.key}-${tag}`);
  const prefix = setup.store === "redis" ? ctx.redisPrefix(`${setup.key}-${tag}`) : undefined;
  const storeUrl = setup.store === "redis" ? REDIS_URL : `sqlite://${join(dir, "tasks.db")}`;
  const images =
    setup.images === "memory"
      ? { url: "memory://" }
      : setup.images === "file" || setup.images === "tmpfs"
        ? { url: `file://${join(dir, "images")}` }
        : {
            url: `s3://${s3.bucket}/${ctx.runId}-${setup.key}-${tag}`,
            s3: {
              endpoint: s3.url,
              forcePathStyle: true,
              accessKeyId: s3.accessKeyId,
              secretAccessKey: s3.secretAccessKey,
            },
          };
  return { dir, prefix, storeUrl, images };
}

function start(ctx, channel, where, imageTasks) {
  const config = serviceConfig({
    channelUrl: channel.url,
    storeUrl: where.storeUrl,
    prefix: where.prefix,
    imageTasks: { maxConcurrent: 16, ...imageTasks },
  });
  return startService(ctx, { ...config, images: where.images });
}

const submitJob = (service, format, wait) => ({
  origins: [service.url],
  requests: [
    {
      path: "/v1/images/tasks",
      method: "POST",
      headers: wait ? { ...JSON_HEADERS, prefer: `wait=${wait}` } : JSON_HEADERS,
      body: taskBody("gpt-image-1", format),
    },
  ],
  concurrency: 32,
  collectIds: true,
});

export async function run(ctx, out) {
  const { quick } = ctx.options;
  // As the Docker image runs the service (see the Dockerfile): image-sized buffers from mmap,
  // back to the system once freed. The processes started from here on inherit it.
  process.env.MALLOC_MMAP_THRESHOLD_ ??= "131072";
  const channel = await startFakeChannel(ctx, { realImages: true });
  const loader = await startLoader(ctx);
  const s3 = (await startChild("s3-server.mjs", [], { group: ctx.group })).ready;
  const haveRedis = await redisAvailable();
  const haveTmpfs = existsSync(TMPFS);
  const setups = SETUPS.filter(
    (setup) => (setup.store !== "redis" || haveRedis) && (setup.images !== "tmpfs" || haveTmpfs),
  );
  out.figures = {
    throughputTasks: quick ? 8 : 300,
    tasks: quick ? 40 : 10_000,
    retentionSec: quick ? 5 : 100,
    setups: {},
  };
  out.notes = [
    "Every image is a 1024x1024 PNG of noise (3.0 MiB; 4 MiB as base64), as gpt-image models answer; url tasks, n=1.",
    `Throughput: ${out.figures.throughputTasks} tasks submitted at once (32 at a time), maxConcurrent 16, one setup at a time; "store B/task" is the task store's bytes per finished task (Redis: MEMORY USAGE over the run's keys; SQLite: the growth of the pages in use).`,
    `Held: submissions with Prefer: wait=30 until ${fmt(out.figures.tasks)} tasks or the window; RSS after a GC; retentionSec ${out.figures.retentionSec}. The service runs with MALLOC_MMAP_THRESHOLD_=${process.env.MALLOC_MMAP_THRESHOLD_}, as the Docker image does.`,
  ];
  if (!haveRedis) out.notes.push(`no Redis at ${REDIS_URL}: the Redis setups were skipped`);
  for (const setup of setups) out.figures.setups[setup.key] = { label: setup.label };
  summarize(out, setups);

  for (const setup of setups) {
    ctx.check();
    await throughput(ctx, out, setup, { channel, loader, s3 });
    summarize(out, setups);
  }
  const held = setups.filter((setup) => HOLD.includes(setup.key));
  await Promise.all(held.map((setup) => hold(ctx, out, setup, { channel, loader, s3, setups })));
  summarize(out, setups);
}

async function throughput(ctx, out, setup, { channel, loader, s3 }) {
  const figures = out.figures.setups[setup.key];
  const count = out.figures.throughputTasks;
  const where = place(ctx, setup, "rate", s3);
  const sqlite = setup.store === "sqlite";
  // SQLite's file belongs to the running service: its empty size is read from a first start.
  if (sqlite) await (await start(ctx, channel, where, { retentionSec: 3600 })).stop();
  const storeEmpty = sqlite ? await storeBytes(where) : 0;
  const service = await start(ctx, channel, where, { retentionSec: 3600 });
  let finished = 0;
  try {
    const deadline = () => ctx.deadline - 5000;
    const warm = await loader.run({
      ...submitJob(service, "url", 30),
      count: 4,
      timeoutMs: 30_000,
    });
    const cpuBefore = await service.stats();
    const startedAt = Date.now();
    const submitted = await loader.run({
      ...submitJob(service, "url"),
      count,
      timeoutMs: Math.max(1000, Math.min(120_000, deadline() - Date.now())),
    });
    const ids = submitted.ids ?? [];
    figures.submitted = ids.length;
    figures.submissionsPerSec = ids.length / submitted.seconds;
    for (const id of ids)
      await waitFinished(service.url, id, { signal: ctx.signal, deadline: deadline() });
    figures.completionsPerSec = ids.length / ((Date.now() - startedAt) / 1000);
    // The service's own CPU per task (not the S3 server's or the disk's, which share the machine).
    figures.cpuMsPerTask = cpuMicros(cpuBefore, await service.stats()) / 1000 / ids.length;
    finished = ids.length + (warm.ids?.length ?? 0);
    if (!sqlite) figures.storeBytesPerTask = (await storeBytes(where)) / finished;
    if (setup.images !== "memory" && setup.images !== "s3") {
      const images = await treeSize(join(where.dir, "images"));
      figures.imageBytesPerTask = images.bytes / finished;
    }
    ctx.log(`memory: ${setup.label}: ${fmt(figures.completionsPerSec, 1)} completions/s`);
  } finally {
    await service.stop();
    if (sqlite && finished > 0) {
      figures.storeBytesPerTask = ((await storeBytes(where)) - storeEmpty) / finished;
    }
    // Its images are of no more use: the next setup gets the disk (and the tmpfs its memory).
    await rm(where.dir, { recursive: true, force: true });
  }
}

/**
 * The task store's size: Redis, MEMORY USAGE over the prefix; SQLite (its service stopped), the
 * pages in use, tables and indexes (the file itself grows in steps).
 */
async function storeBytes(where) {
  if (where.prefix) return (await prefixMemory(where.prefix)).bytes;
  const db = new Database(where.storeUrl.slice("sqlite://".length), {
    readonly: true,
    fileMustExist: true,
  });
  try {
    const pragma = (name) => db.pragma(name, { simple: true });
    return (pragma("page_count") - pragma("freelist_count")) * pragma("page_size");
  } finally {
    db.close();
  }
}

async function hold(ctx, out, setup, { channel, loader, s3, setups }) {
  const figures = out.figures.setups[setup.key];
  const { quick } = ctx.options;
  const count = out.figures.tasks;
  const { retentionSec } = out.figures;
  // Retention outlasts the window and the settling after it: every task is held when measured.
  const windowMs = quick ? 3000 : 70_000;
  const settleMs = quick ? 0 : 15_000;
  const where = place(ctx, setup, "hold", s3);
  const service = await start(ctx, channel, where, { retentionSec });
  try {
    const deadline = () => ctx.deadline - 3000;
    const firstExpiry = Date.now() + retentionSec * 1000;
    const job = submitJob(service, "url", 30);
    const warm = await loader.run({ ...job, count: 10, timeoutMs: 30_000 });
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
    while (Date.now() < settleUntil && !ctx.signal.aborted) await sleep(1000);
    const held = await service.gc();
    figures.rssHeldMiB = held.memory.rss / MIB;
    const heldBytes = (m) => m.heapUsed + m.arrayBuffers;
    const perTask =
      (heldBytes(held.memory) - heldBytes(before.memory)) / (submitted.ids?.length || 1);
    figures.heapPerTaskKiB = perTask / 1024;
    if (ids.length < count) {
      figures.rssEstimatedMiB =
        (held.memory.rss + Math.max(0, perTask) * (count - ids.length)) / MIB;
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

function summarize(out, setups) {
  const f = (setup) => out.figures.setups[setup.key] ?? {};
  const baseline = out.figures.setups[BASELINE]?.completionsPerSec;
  const baselineCpu = out.figures.setups[BASELINE]?.cpuMsPerTask;
  out.tables = [
    {
      title: `Real-size images: throughput and task-store weight (${fmt(out.figures.throughputTasks)} url tasks)`,
      columns: [
        "task store, images",
        "submissions/s",
        "completions/s",
        "vs Redis, tmpfs",
        "service CPU ms/task",
        "CPU vs tmpfs",
        "store B/task",
        "image KiB/task",
      ],
      rows: setups.map((setup) => [
        setup.label,
        fmt(f(setup).submissionsPerSec, 1),
        fmt(f(setup).completionsPerSec, 1),
        setup.store === "redis" ? fmt(ratio(f(setup).completionsPerSec, baseline), 2) : "-",
        fmt(f(setup).cpuMsPerTask, 1),
        setup.store === "redis" ? fmt(ratio(f(setup).cpuMsPerTask, baselineCpu), 2) : "-",
        fmt(f(setup).storeBytesPerTask, 0),
        fmt(
          f(setup).imageBytesPerTask === undefined ? undefined : f(setup).imageBytesPerTask / 1024,
          0,
        ),
      ]),
    },
    {
      title: `Holding finished real-size tasks (up to ${fmt(out.figures.tasks)}), then expired`,
      columns: [
        "task store, images",
        "tasks held",
        "RSS before MiB",
        "RSS right after MiB",
        "RSS held MiB",
        "heap KiB/task",
        `RSS est. for ${fmt(out.figures.tasks)} MiB`,
        "RSS after expiry MiB",
        "image files held / after expiry",
      ],
      rows: setups
        .filter((setup) => HOLD.includes(setup.key))
        .map((setup) => {
          const x = f(setup);
          return [
            setup.label,
            fmt(x.held),
            fmt(x.rssBeforeMiB, 1),
            fmt(x.rssBurstMiB, 1),
            x.rssHeldMiB === undefined
              ? "-"
              : `${fmt(x.rssHeldMiB, 1)}${x.allHeld === false ? " (some expired)" : ""}`,
            fmt(x.heapPerTaskKiB, 2),
            fmt(x.rssEstimatedMiB, 1),
            x.rssAfterExpiryMiB === undefined
              ? "-"
              : `${fmt(x.rssAfterExpiryMiB, 1)}${x.expired === false ? " (not expired in time)" : ""}`,
            setup.images === "file"
              ? `${fmt(x.imageFilesHeld)} / ${fmt(x.imageFilesAfterExpiry)}`
              : "-",
          ];
        }),
    },
  ];
}

export function targets(figures) {
  const setups = figures?.setups ?? {};
  const rows = [];
  for (const key of HOLD) {
    const x = setups[key];
    if (!x) continue;
    const mib = x.rssEstimatedMiB ?? x.rssHeldMiB;
    rows.push({
      target: `${x.label}: 10,000 finished real-size tasks under 200 MB RSS`,
      measured:
        mib === undefined
          ? "-"
          : `${fmt((mib * MIB) / 1e6)} MB${x.rssEstimatedMiB !== undefined ? ` (est. from ${fmt(x.held)} tasks)` : ""}`,
      met: mib === undefined || figures.tasks !== 10_000 ? null : mib * MIB < 200e6,
    });
  }
  for (const x of Object.values(setups)) {
    if (x.storeBytesPerTask === undefined) continue;
    rows.push({
      target: `${x.label}: task store under 2 KB per finished task`,
      measured: `${fmt(x.storeBytesPerTask)} B`,
      met: x.storeBytesPerTask < 2048,
    });
  }
  const baseline = setups[BASELINE]?.completionsPerSec;
  const baselineCpu = setups[BASELINE]?.cpuMsPerTask;
  for (const key of ["redis-file", "redis-s3"]) {
    const share = ratio(setups[key]?.completionsPerSec, baseline);
    if (share === null) continue;
    const cpu = ratio(setups[key]?.cpuMsPerTask, baselineCpu);
    rows.push({
      target: `${setups[key].label}: the image store costs the Redis path under 20 % of its completions/s`,
      measured: `${fmt(share * 100)} % of Redis with images on tmpfs (service CPU/task ${fmt(cpu, 2)}x)`,
      met: share > 0.8,
    });
  }
  return rows;
}
