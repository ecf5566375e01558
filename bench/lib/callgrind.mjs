// Instruction counts with valgrind's callgrind: a process under test runs under callgrind,
// started without instrumentation (node's start-up goes several times faster so) and
// instrumented as soon as it is ready; once warmed up, its counters are zeroed, a fixed number
// of requests sent, and its counters dumped, one file per thread. The figure is the main thread's
// instructions per request (the event loop: the hot path, with its share of garbage collection
// done there): unlike CPU time, it does not move with what else runs on the machine. The other
// threads (V8's compiler and GC helpers) work in bursts whose count varies from round to round;
// they are reported beside it.
//
// Why the warm-up comes after the switch: with instrumentation switched on after a warm-up, V8
// went through its tiers again after the switch, whatever the warm-up before it, and counts
// fell for thousands of requests. Warmed up instrumented, the bare pipes converged after about
// 4,000 requests at concurrency 1 and the service after about 3,000, to within a few percent
// from round to round (the main thread; a re-optimization now and then still moves a round).
import { execFile, spawnSync } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { anyCore } from "./cores.mjs";

const run = promisify(execFile);

/** True when valgrind and callgrind_control are here. */
export function callgrindAvailable() {
  const vg = spawnSync("valgrind", ["--version"], { encoding: "utf8" });
  const control = spawnSync("callgrind_control", ["--version"], { encoding: "utf8" });
  return !vg.error && vg.status === 0 && !control.error;
}

/**
 * The prefix that runs node under callgrind, writing its dumps and valgrind's control FIFOs
 * under `dir`, on any core (`pinning`): a count does not depend on the core, and the processes
 * counted side by side go faster on all of them.
 */
export function callgrindPrefix(dir, role, pinning) {
  return [
    ...anyCore(pinning),
    "valgrind",
    "--tool=callgrind",
    ...cacheSimulation(),
    "--separate-threads=yes",
    "--instr-atstart=no",
    `--callgrind-out-file=${join(dir, `callgrind.${role}.%p`)}`,
    `--vgdb-prefix=${join(dir, "vgdb")}`,
    "--dump-line=no",
    "--compress-strings=no",
    `--log-file=${join(dir, `valgrind.${role}.%p.log`)}`,
  ];
}

/**
 * BENCH_CALLGRIND_CACHE=1 adds callgrind's cache and branch-predictor simulation (its model of
 * the machine's caches, about twice as slow): the dumps then also count instruction and data
 * cache misses (I1mr, D1mr, D1mw, ILmr, DLmr, DLmw) and mispredicted branches (Bcm, Bim), which
 * `bench/callgrind-functions.mjs --event` reads by function. Valgrind's cache options in place
 * of `1` set the model's sizes (`--LL=524288,8,64`: a last level the size of a 512 KiB L2, whose
 * misses the default model, with the L3 as its last level, does not see). The instruction counts
 * (Ir, the first event) are the same with it or without.
 */
function cacheSimulation(env = process.env) {
  const value = env.BENCH_CALLGRIND_CACHE?.trim();
  if (!value) return [];
  const sizes = value === "1" ? [] : value.split(/\s+/);
  const wrong = sizes.find((option) => !/^--(I1|D1|LL)=\d+,\d+,\d+$/.test(option));
  if (wrong)
    throw new Error(`BENCH_CALLGRIND_CACHE: ${wrong} is not 1 or --I1/--D1/--LL=size,assoc,line`);
  return ["--cache-sim=yes", "--branch-sim=yes", ...sizes];
}

async function totalsOf(file) {
  const text = await readFile(file, "utf8");
  const totals = /^(?:totals|summary):\s*(\d+)/m.exec(text)?.[1];
  if (totals === undefined) throw new Error(`no totals in ${file}`);
  return Number(totals);
}

/** Talks to one process running under callgrind. */
export function callgrindControl(dir, pid) {
  const control = async (...args) => {
    await run("callgrind_control", [`--vgdb-prefix=${join(dir, "vgdb")}`, ...args, String(pid)], {
      timeout: 120_000,
    });
  };
  let dumps = 0;
  return {
    instrumentOn: () => control("-i", "on"),
    zero: () => control("-z"),
    /**
     * Dumps the counters (which zeroes them); resolves the instructions counted since the last
     * zero or dump: `{ main, others }` (the main thread's, the other threads' together).
     */
    async dump() {
      await control("--dump");
      dumps += 1;
      const pattern = new RegExp(`^callgrind\\.[\\w-]+\\.${pid}\\.${dumps}-(\\d+)$`);
      const files = (await readdir(dir)).filter((name) => pattern.test(name));
      let main;
      let others = 0;
      for (const name of files) {
        const count = await totalsOf(join(dir, name));
        if (Number(pattern.exec(name)[1]) === 1) main = count;
        else others += count;
      }
      if (main === undefined) throw new Error(`callgrind dump ${dumps} of ${pid} not found`);
      return { main, others };
    },
  };
}
