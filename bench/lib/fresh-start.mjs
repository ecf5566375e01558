// The issue's own check of real-size tasks, as a user would run it: a service started anew on
// Redis, its images where the default `./data/images` puts them (data/images under the
// service's folder: here the run's temp folder, on disk), then N url tasks at a low concurrency
// from its very first task, with no warm-up. A fresh process's first tasks cost more than the
// throughput rounds' warmed ones (V8 compiles the task path once, and memory is touched for the
// first time), and this check counts them: service CPU per task over all of them and per step,
// RSS before the first task and after the last (no forced GC, no allocator tuning). A full run
// starts it three times, each a new service on a folder and prefix of its own: one start on a
// shared VM read anywhere from 10 to 19 ms a task for the same build within ten minutes, so the
// target is judged on the median, with the rounds' spread beside it.
import { join } from "node:path";
import { pick } from "./mode.mjs";
import { startOn, submitJob } from "./real-size.mjs";
import { REDIS_URL } from "./redis-keys.mjs";
import { cpuMicros, MIB, spread } from "./stats.mjs";
import { getTask, waitFinished } from "./task-client.mjs";

/** Tasks in flight at once (each a `Prefer: wait` submission): a client with a few workers. */
export const FRESH_CONCURRENCY = 4;
/** Tasks per step of the CPU figures. */
const STEP = 50;

/** How many tasks the check runs: the 300 in a full run. */
export const freshTasks = (options) => pick(options, { smoke: 8, quick: 100, full: 300 });

/** How many fresh starts: 3 in a full run, 1 otherwise (`BENCH_FRESH_ROUNDS` sets it). */
export function freshRounds(options) {
  const set = Number(process.env.BENCH_FRESH_ROUNDS);
  if (Number.isInteger(set) && set >= 1) return set;
  return pick(options, { smoke: 1, quick: 1, full: 3 });
}

/**
 * Runs the check {@link freshRounds} times, each on a service of its own, into `figures`
 * (`{ tasks, concurrency, step, rounds: [{ cpuMsPerTask, stepMsPerTask[], rssBeforeMiB,
 * rssAfterMiB, failed }] }`, as {@link freshFigures} makes it): a round at a time, so that the
 * rounds done are reported when a later one runs past the phase's deadline.
 */
export async function measureFreshStarts(ctx, deps, figures) {
  for (let round = 1; round <= freshRounds(ctx.options); round++) {
    if (ctx.signal?.aborted) break;
    figures.rounds.push(await measureFreshStart(ctx, deps, round, figures.tasks));
    const { cpuMsPerTask } = figures.rounds.at(-1);
    ctx.log(`memory: fresh start ${round}: ${cpuMsPerTask.toFixed(1)} ms a task`);
  }
}

/** The check's figures before its first round. */
export const freshFigures = (options) => ({
  tasks: freshTasks(options),
  concurrency: FRESH_CONCURRENCY,
  step: STEP,
  rounds: [],
});

/** One fresh start: a new service (stopped after it) on a folder and prefix of its own. */
async function measureFreshStart(ctx, { channel, loader }, round, tasks) {
  const dir = join(ctx.tempDir, `fresh-${round}`);
  const where = {
    dir,
    storeUrl: REDIS_URL,
    prefix: ctx.redisPrefix(`fresh-${round}`),
    images: { url: `file://${join(dir, "data", "images")}` },
  };
  const service = await startOn(ctx, channel, where, { retentionSec: 3600, label: "fresh" });
  try {
    const first = await service.stats();
    const stepMsPerTask = [];
    const ids = [];
    let last = first;
    for (let done = 0; done < tasks;) {
      const count = Math.min(STEP, tasks - done);
      const run = await loader.run({
        ...submitJob(service, "url", 60),
        concurrency: FRESH_CONCURRENCY,
        count,
        timeoutMs: Math.max(1000, Math.min(120_000, ctx.deadline - 5000 - Date.now())),
      });
      const accepted = run.ids ?? [];
      ids.push(...accepted);
      // Each answer came when its task ended (`Prefer: wait`); the last one read makes sure.
      if (accepted.length > 0) {
        await waitFinished(service.url, accepted.at(-1), {
          signal: ctx.signal,
          deadline: ctx.deadline - 5000,
        });
      }
      const now = await service.stats();
      stepMsPerTask.push(cpuMicros(last, now) / 1000 / count);
      last = now;
      done += count;
    }
    // Read once the figures are taken: every task that did not end completed (refused ones too).
    let completed = 0;
    for (const id of ids) {
      const { task } = await getTask(service.url, id, { signal: ctx.signal });
      if (task?.status === "completed") completed += 1;
    }
    return {
      cpuMsPerTask: cpuMicros(first, last) / 1000 / tasks,
      stepMsPerTask,
      rssBeforeMiB: first.memory.rss / MIB,
      rssAfterMiB: last.memory.rss / MIB,
      failed: tasks - completed,
    };
  } finally {
    await service.stop();
  }
}

/**
 * Over a check's rounds: the spreads of CPU per task and RSS before and after, and the median
 * CPU per task of each step.
 */
export function freshSpreads(fresh) {
  const of = (read) => spread(fresh.rounds.map(read));
  return {
    cpuMsPerTask: of((r) => r.cpuMsPerTask),
    stepMsPerTask: fresh.rounds[0].stepMsPerTask.map(
      (_, n) => of((r) => r.stepMsPerTask[n])?.median,
    ),
    rssBeforeMiB: of((r) => r.rssBeforeMiB),
    rssAfterMiB: of((r) => r.rssAfterMiB),
  };
}
