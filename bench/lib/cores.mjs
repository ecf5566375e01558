// Pinning: where the machine allows (taskset, at least two cores this process may use), the
// bench keeps the load side (its own process, the load generator, the fake channel, s3rver)
// on some cores and the processes under test (the service, the pipes, nginx) on the others,
// so that the load generator never takes time from what it measures. On a 2-core machine:
// the load on core 0, the process under test on core 1. BENCH_PIN=0 turns it off.
import { spawnSync } from "node:child_process";

/** The cores `pid` may run on (`taskset -c -p`), or null without taskset. */
function affinity(pid) {
  const out = spawnSync("taskset", ["-c", "-p", String(pid)], { encoding: "utf8" });
  if (out.error || out.status !== 0) return null;
  const list = /:\s*([\d,\s-]+)$/m.exec(out.stdout)?.[1]?.trim();
  if (!list) return null;
  return list.split(",").flatMap((part) => {
    const [from, to = from] = part.split("-").map(Number);
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  });
}

/**
 * Decides the pinning and pins this process (and so every child it forks, which inherits its
 * affinity) to the load cores. Resolves `{ pinned, load, test, reason }`: `test` are the cores
 * the processes under test get (the last core), `load` the others.
 */
export function setUpPinning(env = process.env) {
  if (env.BENCH_PIN === "0") return { pinned: false, reason: "off (BENCH_PIN=0)" };
  const cores = affinity(process.pid);
  if (!cores) return { pinned: false, reason: "no taskset on this machine" };
  if (cores.length < 2) return { pinned: false, reason: `one core only (${cores.join(",")})` };
  const test = cores.slice(-1);
  const load = cores.slice(0, -1);
  // -a: every thread of this process, the libuv and V8 ones included.
  const pinned = spawnSync("taskset", ["-a", "-c", "-p", load.join(","), String(process.pid)], {
    encoding: "utf8",
  });
  if (pinned.status !== 0) {
    return { pinned: false, reason: `taskset refused: ${pinned.stderr.trim()}` };
  }
  return { pinned: true, load, test, reason: `load on core ${load}, under test on core ${test}` };
}

/**
 * The command prefix that runs a process under test on the test cores (`taskset -c N`), or
 * an empty list when nothing is pinned.
 */
export const underTest = (pinning) =>
  pinning?.pinned ? ["taskset", "-c", pinning.test.join(",")] : [];

/**
 * The command prefix that lets a process use every core the bench may use (the bench's own
 * children inherit its pinning to the load cores), or an empty list when nothing is pinned.
 */
export const anyCore = (pinning) =>
  pinning?.pinned ? ["taskset", "-c", [...pinning.load, ...pinning.test].join(",")] : [];
