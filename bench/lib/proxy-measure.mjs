// The proxy phase's measurements: a load on one target, or on the service and BASELINE at the
// same time, with the CPU time each process spent meanwhile; and the order of a round.
//
// Why the service and BASELINE are measured at the same time: on a shared machine the other
// processes' load moves from second to second, so two targets measured one after the other
// meet different machines. Control runs (BASELINE a build of the same commit) measured only in
// turn put the service at 0.63x to 1.47x of BASELINE in CPU per request (median over 5
// rounds; with the builds' roles swapped, the other way round: no build is cheaper, the
// moment is). Loaded together, both processes share the core under test and whatever else
// runs on it, moment by moment: their ratio no longer carries the drift.
import { cpuMicros, sleep } from "./stats.mjs";
import { runWrk } from "./wrk.mjs";

/**
 * The order in which round `round` measures `targets`: turned by one target a round (each
 * target takes each position in turn), the service and BASELINE kept next to each other and
 * changing places every round, so that neither always follows the same target nor always
 * comes first of the two.
 */
export function roundOrder(targets, round, pair = ["service", "baseline"]) {
  const together = pair.every((target) => targets.includes(target));
  const units = together
    ? targets.filter((target) => target !== pair[1]).map((t) => (t === pair[0] ? pair : [t]))
    : targets.map((target) => [target]);
  const turned = units.map((_, i) => units[(i + round) % units.length]);
  return turned.flatMap((unit) => (unit === pair && round % 2 ? [...unit].reverse() : unit));
}

/** Runs `load` against `proc` for `ms` with wrk or the Node load generator. */
function drive(ctx, { useWrk, loader }, load, proc, ms) {
  return useWrk
    ? runWrk(ctx, {
        origin: proc.url,
        request: load.request,
        concurrency: load.concurrency,
        durationMs: ms,
      })
    : loader.run({
        origins: [proc.url],
        requests: [load.request],
        concurrency: load.concurrency,
        durationMs: ms,
        timeoutMs: ms + 20_000,
      });
}

/** A sample: the load's figures and the process's CPU per request between two stats. */
function sampleOf(load, target, result, before, after) {
  if (result.ok === 0)
    throw new Error(
      `${load.key} via ${target}: no request succeeded (${JSON.stringify(result.statuses)}, ${result.errors} errors)`,
    );
  return {
    rps: result.rps,
    p50Ms: result.p50Ms,
    p99Ms: result.p99Ms,
    cpuUs: cpuMicros(before, after) / result.ok,
    // The kernel's share: a gap between CPU time and instruction counts (user space) shows here.
    systemUs: (after.cpu.system - before.cpu.system) / result.ok,
    failed: result.requests - result.ok,
  };
}

// A pause after each measurement: the target's last answers, its closing connections and what
// its exporter still sends run before the next target's measurement starts, not during it.
const SETTLE_MS = 100;

/**
 * Measures `load` on `targets[target]` for `ms`. `env`: `{ useWrk, loader, targets, probe }`.
 * Resolves the sample, with the speed probe's reading just before it (`probeMs`, see
 * speed-probe.mjs) when `env.probe` is given.
 */
export async function measure(ctx, env, load, target, ms) {
  const proc = env.targets[target];
  const probeMs = await env.probe?.read();
  const before = await proc.stats();
  const result = await drive(ctx, env, load, proc, ms);
  const after = await proc.stats();
  await sleep(SETTLE_MS);
  return { ...sampleOf(load, target, result, before, after), probeMs };
}

/**
 * Measures `load` on two targets at once (one load generator each, started together, the
 * first one named first), each with its own `concurrency`; resolves their samples, in order.
 */
export async function measureTogether(ctx, env, load, names, ms) {
  const procs = names.map((target) => env.targets[target]);
  const probeMs = await env.probe?.read();
  const before = await Promise.all(procs.map((proc) => proc.stats()));
  const results = await Promise.all(procs.map((proc) => drive(ctx, env, load, proc, ms)));
  const after = await Promise.all(procs.map((proc) => proc.stats()));
  await sleep(SETTLE_MS);
  return names.map((target, i) => ({
    ...sampleOf(load, target, results[i], before[i], after[i]),
    probeMs,
  }));
}
