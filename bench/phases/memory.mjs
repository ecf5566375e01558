// Memory: what COUNT finished tasks cost to hold. Three services side by side, each with its
// own store: memory store with results as b64_json, memory store with results as url (the
// service keeps the image bytes and hands out its own URL), and Redis with url results (the
// sum of MEMORY USAGE over the run's keys, and the INFO used_memory delta). For each: RSS
// after a GC before, with the tasks held, and after retention expired them (the sweep runs
// every retentionSec, at most every minute). Submissions carry `Prefer: wait=30`, so that
// they come back once their task is finished and no backlog builds up; they stop at COUNT
// tasks or after the submission window, whichever comes first. When the window ends first,
// the RSS for COUNT tasks is estimated from the RSS per task measured, and marked so.
import { taskBody } from "../lib/payloads.mjs";
import {
  JSON_HEADERS,
  startFakeChannel,
  startLoader,
  startService,
  serviceConfig,
} from "../lib/processes.mjs";
import { prefixMemory, redisAvailable, REDIS_URL, usedMemory } from "../lib/redis-keys.mjs";
import { fmt, MIB, sleep } from "../lib/stats.mjs";
import { getTask, waitFinished, waitGone } from "../lib/task-client.mjs";

export const name = "memory";
export const deadlineSec = ({ quick }) => (quick ? 40 : 250);

const RUNS = [
  { key: "memory-b64", label: "memory store, b64_json", format: "b64_json" },
  { key: "memory-url", label: "memory store, url", format: "url" },
  { key: "redis-url", label: "Redis store, url", format: "url", redis: true },
];

export async function run(ctx, out) {
  const { quick } = ctx.options;
  const count = quick ? 40 : 10_000;
  // Retention outlasts the submission window and the settling after it, so every task is
  // still held when measured. The three services share the cores: 70 s lets each reach 10,000.
  const windowMs = quick ? 3000 : 70_000;
  const retentionSec = quick ? 5 : 100;
  const settleMs = quick ? 0 : 15_000;
  const channel = await startFakeChannel(ctx);
  const loader = await startLoader(ctx);
  const haveRedis = await redisAvailable();
  out.figures = { tasks: count, retentionSec, runs: {} };
  out.notes = [
    `RSS after a GC: right after the last task finished, and held: after ${settleMs / 1000} s idle (V8 gives back the pages the burst grew into). Heap KiB/task: JS heap and array buffers added per task held. retentionSec ${retentionSec} in the bench's configuration, so the sweep runs every ${Math.min(60, retentionSec)} s.`,
  ];
  if (!haveRedis) out.notes.push(`no Redis at ${REDIS_URL}: the Redis run was skipped`);
  const runs = RUNS.filter((run) => !run.redis || haveRedis);
  summarize(out, runs);
  await Promise.all(
    runs.map((run) =>
      measure(ctx, out, run, { channel, loader, count, windowMs, retentionSec, settleMs, runs }),
    ),
  );
}

async function measure(
  ctx,
  out,
  run,
  { channel, loader, count, windowMs, retentionSec, settleMs, runs },
) {
  const prefix = run.redis ? ctx.redisPrefix(run.key) : undefined;
  const service = await startService(
    ctx,
    serviceConfig({
      channelUrl: channel.url,
      storeUrl: run.redis ? REDIS_URL : "memory://",
      prefix,
      imageTasks: { retentionSec, maxConcurrent: 16 },
    }),
  );
  const figures = { label: run.label };
  out.figures.runs[run.key] = figures;
  const deadline = () => ctx.deadline - 3000;
  const submit = {
    origins: [service.url],
    requests: [
      {
        path: "/v1/images/tasks",
        method: "POST",
        headers: { ...JSON_HEADERS, prefer: "wait=30" },
        body: taskBody("gpt-image-1", run.format),
      },
    ],
    concurrency: 32,
    collectIds: true,
  };
  // The first task expires retentionSec after it finished: everything is measured before that.
  const firstExpiry = Date.now() + retentionSec * 1000;
  // A few tasks first, so that the baseline has the code paths and caches warm.
  const warm = await loader.run({ ...submit, count: 20, timeoutMs: 20_000 });
  const before = await service.gc();
  figures.rssBeforeMiB = before.memory.rss / MIB;
  const redisBefore = run.redis ? await usedMemory() : undefined;

  const submitted = await loader.run({
    ...submit,
    count: count - (warm.ids?.length ?? 0),
    timeoutMs: Math.max(1000, Math.min(windowMs, deadline() - Date.now())),
  });
  const ids = [...(warm.ids ?? []), ...(submitted.ids ?? [])];
  figures.submitted = ids.length;
  if (ids.length === 0)
    throw new Error(`${run.label}: no task accepted (${JSON.stringify(submitted.statuses)})`);
  await waitFinished(service.url, ids.at(-1), { signal: ctx.signal, deadline: deadline() });
  // Were all still there when measured? (The first finished first and expires first.)
  figures.allHeld = (await getTask(service.url, ids[0], { signal: ctx.signal })).status === 200;
  const burst = await service.gc();
  const burstAt = Date.now();
  figures.rssBurstMiB = burst.memory.rss / MIB;
  // Right after the burst V8 still holds the pages it grew into; what an operator's dashboard
  // shows is the RSS once the process has been idle a little while, so that is "held".
  const settleUntil = Math.min(Date.now() + settleMs, firstExpiry - 5000, deadline());
  while (Date.now() < settleUntil && !ctx.signal.aborted) await sleep(1000);
  const held = Date.now() > burstAt + 1000 ? await service.gc() : burst;
  figures.rssHeldMiB = held.memory.rss / MIB;
  figures.heapHeldMiB = held.memory.heapUsed / MIB;
  figures.rssPerTaskKiB =
    (held.memory.rss - before.memory.rss) / 1024 / (submitted.ids?.length || 1);
  const heldBytes = (m) => m.heapUsed + m.arrayBuffers;
  figures.heapPerTaskKiB =
    (heldBytes(held.memory) - heldBytes(before.memory)) / 1024 / (submitted.ids?.length || 1);
  if (ids.length < count) {
    // RSS does not grow linearly at small counts (heap pages, allocator): the estimate adds
    // the tasks not held at what each held one costs the JS heap and array buffers.
    const more =
      (heldBytes(held.memory) - heldBytes(before.memory)) *
      ((count - ids.length) / (submitted.ids?.length || 1));
    figures.rssEstimatedMiB = (held.memory.rss + Math.max(0, more)) / MIB;
  }
  if (run.redis) {
    const keys = await prefixMemory(prefix);
    figures.redisKeys = keys.keys;
    figures.redisMiB = keys.bytes / MIB;
    figures.redisUsedMemoryDeltaMiB = ((await usedMemory()) - redisBefore) / MIB;
  }
  summarize(out, runs);
  ctx.log(`memory: ${run.label}: ${ids.length} tasks held, waiting for retention to expire them`);

  // Expiry: the last task answers 404, then the sweep takes everything out; give it one
  // sweep interval, and stop early once the heap is back near where it was.
  const expired = await waitGone(service.url, ids.at(-1), {
    signal: ctx.signal,
    deadline: deadline(),
    everyMs: 1000,
  });
  const sweptBy = Date.now() + Math.min(60, retentionSec) * 1000 + 1000;
  const settleBy = Math.min(deadline(), sweptBy);
  let after = await service.gc();
  const heapTarget = before.memory.heapUsed + 0.2 * (held.memory.heapUsed - before.memory.heapUsed);
  while (expired && after.memory.heapUsed > heapTarget && Date.now() < settleBy) {
    await sleep(1000);
    after = await service.gc();
  }
  // Swept: the heap is back down, or a whole sweep interval passed after the last expired.
  figures.expired = expired && (after.memory.heapUsed <= heapTarget || Date.now() >= sweptBy);
  figures.rssAfterExpiryMiB = after.memory.rss / MIB;
  figures.heapAfterExpiryMiB = after.memory.heapUsed / MIB;
  if (run.redis) figures.redisKeysAfterExpiry = (await prefixMemory(prefix)).keys;
  summarize(out, runs);
  await service.stop();
}

function summarize(out, runs) {
  const rows = runs.map((run) => {
    const f = out.figures.runs[run.key] ?? {};
    return [
      run.label,
      fmt(f.submitted),
      fmt(f.rssBeforeMiB, 1),
      fmt(f.rssBurstMiB, 1),
      f.rssHeldMiB === undefined
        ? "-"
        : `${fmt(f.rssHeldMiB, 1)}${f.allHeld === false ? " (some expired)" : ""}`,
      fmt(f.heapPerTaskKiB, 2),
      fmt(f.rssEstimatedMiB, 1),
      f.rssAfterExpiryMiB === undefined
        ? "-"
        : `${fmt(f.rssAfterExpiryMiB, 1)}${f.expired ? "" : " (sweep not seen)"}`,
      run.redis
        ? `${fmt(f.redisMiB, 1)} (${fmt(f.redisKeys)} keys${f.redisKeysAfterExpiry === undefined ? "" : `, ${fmt(f.redisKeysAfterExpiry)} after expiry`})`
        : "-",
    ];
  });
  out.tables = [
    {
      title: `Memory: finished tasks held (up to ${fmt(out.figures.tasks)}), then expired`,
      columns: [
        "store, results",
        "tasks held",
        "RSS before MiB",
        "RSS right after MiB",
        "RSS held MiB",
        "heap KiB/task",
        `RSS est. for ${fmt(out.figures.tasks)} MiB`,
        "RSS after expiry MiB",
        "Redis MiB",
      ],
      rows,
    },
  ];
}

export function targets(figures) {
  const url = figures?.runs?.["memory-url"];
  // Measured with 10,000 held, or estimated from the RSS per task when fewer were.
  const mib = url?.rssEstimatedMiB ?? url?.rssHeldMiB;
  const estimated = url?.rssEstimatedMiB !== undefined;
  return [
    {
      target: "10,000 finished url tasks under 200 MB RSS",
      measured:
        mib === undefined
          ? "-"
          : `${fmt((mib * MIB) / 1e6)} MB${estimated ? ` (est. from ${fmt(url.submitted)} tasks)` : ""}`,
      met: mib === undefined || figures.tasks !== 10_000 ? null : mib * MIB < 200e6,
    },
  ];
}
