// How fast the core under test runs, read before each measurement: a fixed piece of integer
// work (speed-loop.mjs, pinned where the processes under test run) and its time in ms.
//
// Why: on this kind of VM whole minutes run a third slower, and neither /proc/stat's steal
// (0) nor the other processes' share ("others") shows it; only the pipes' own figures moved
// (the undici pipe 148 µs a chat in one hour, 49 in another). A ratio's two sides are measured
// seconds apart: the probe says whether they met the same machine, and a round that ran slow
// is named in the table's notes, where before only an odd figure hinted at it.
import { startChild } from "./children.mjs";
import { underTest } from "./cores.mjs";
import { fmt, median } from "./stats.mjs";

/** A round whose probes ran this much slower than the fastest round's is named slow. */
export const SLOW_ROUND = 1.15;

/**
 * Starts the probe on the cores under test; resolves `{ read(): Promise<ms>, stop() }`, a
 * reading the fastest of `tries` runs of the loop (a preemption mid-run does not count).
 */
export async function startSpeedProbe(ctx, tries = 3) {
  const started = await startChild("speed-loop.mjs", [], {
    group: ctx.group,
    prefix: underTest(ctx.options.pinning),
  });
  return {
    read: async () => (await started.ask({ type: "probe", tries }, 10_000)).ms,
    stop: () => started.child.kill("SIGKILL"),
  };
}

/**
 * The probe's readings over a phase, `probes[round]` the readings taken in that round: the
 * median of each round, the fastest and slowest of those, and the rounds (1-based) whose
 * median is {@link SLOW_ROUND} times the fastest round's or more. Null without a reading.
 */
export function speedSummary(probes) {
  const rounds = probes.map((list) => median(list.filter(Number.isFinite)));
  const read = rounds.filter(Number.isFinite);
  if (read.length === 0) return null;
  const fastestMs = Math.min(...read);
  return {
    roundMs: rounds,
    fastestMs,
    slowestMs: Math.max(...read),
    slowRounds: rounds.flatMap((ms, i) => (ms >= fastestMs * SLOW_ROUND ? [i + 1] : [])),
  };
}

/** The note a table gets from {@link speedSummary}. */
export function speedNote(summary) {
  if (!summary) return null;
  const { roundMs, fastestMs, slowestMs, slowRounds } = summary;
  const slow = slowRounds.length
    ? `round${slowRounds.length > 1 ? "s" : ""} ${slowRounds.join(", ")} ran ${Math.round(SLOW_ROUND * 100 - 100)} % or more slower than the fastest: read ${slowRounds.length > 1 ? "their" : "its"} figures with that in mind`
    : `no round ran ${Math.round(SLOW_ROUND * 100 - 100)} % slower than the fastest`;
  return `The core under test's speed, a fixed loop timed before each measurement (median a round): ${roundMs.map((ms) => fmt(ms, 1)).join(" / ")} ms, fastest ${fmt(fastestMs, 1)}, slowest ${fmt(slowestMs, 1)}; ${slow}.`;
}
