// BENCH_PERF=<role>: `perf record` of each process of that role, for the whole of its life. V8's
// own profiler (BENCH_PROFILE) names JavaScript functions but puts native time (the kernel, a
// socket write, V8's compiler thread) wherever a sample lands; perf counts those for what they
// are, and with --perf-basic-prof names the JIT code too (see docs/performance.md, the ninth pass).
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";

const PERF_DIR = resolve(import.meta.dirname, "../../bench-profiles");
/**
 * Node's flags for a recorded process: V8's perf map (/tmp/perf-<pid>.map) names its JIT code.
 * The map turns V8's own log on as well, which would be left as `isolate-<address>-<pid>-v8.log`
 * in the process's folder (the checkout, for the bench and its tests): it goes to a temporary
 * file V8 removes (`+`) instead.
 */
export const PERF_ARGS = ["--perf-basic-prof", "--no-logfile-per-isolate", "--logfile=+"];
let records = 0;
let available;

/** True when `perf` runs here (Debian: linux-perf); said once when it does not. */
function perfAvailable() {
  if (available === undefined) {
    const out = spawnSync("perf", ["--version"], { encoding: "utf8" });
    available = !out.error && out.status === 0;
    if (!available) console.error("bench: BENCH_PERF is set but perf does not run here: skipped");
  }
  return available;
}

/**
 * The recorder of a process of `role`, when BENCH_PERF names it (a role, or several with commas;
 * `label` names its file beside the phase): `args` for its
 * node (JIT code named in /tmp/perf-<pid>.map), `attach(pid)` once it runs, `done()` resolving
 * once perf has written its file (perf stops when the process exits), into `dir` (default
 * bench-profiles/). Does nothing for another role, under callgrind, or without perf.
 */
export function perfRecorder(ctx, role, label, dir = PERF_DIR) {
  // One role or several (`service,undici-pipe`: two processes recorded under the same load).
  const wanted = String(ctx.options.perf ?? "")
    .split(",")
    .map((name) => (name.trim() === "sidecar" ? "service" : name.trim()));
  if (!wanted.includes(role) || ctx.group === "instructions" || !perfAvailable()) {
    return { args: [], attach() {}, done: async () => {} };
  }
  records += 1;
  const name = [ctx.group, role, label, records].filter(Boolean).join("-");
  let exited = Promise.resolve();
  return {
    file: join(dir, `${name}.perf.data`),
    args: PERF_ARGS,
    attach(pid) {
      mkdirSync(dir, { recursive: true });
      const perf = spawn(
        "perf",
        ["record", "-e", "cpu-clock", "-F", "4000", "-g", "-p", String(pid)].concat([
          "-o",
          join(dir, `${name}.perf.data`),
        ]),
        { stdio: "ignore" },
      );
      exited = new Promise((done) => {
        perf.once("exit", done);
        perf.once("error", done);
      });
    },
    /** Resolves once perf has written its file, or after `graceMs` (then it is stopped). */
    async done(graceMs = 10_000) {
      const timer = setTimeout(
        () => spawnSync("pkill", ["-INT", "-f", `${name}.perf.data`]),
        graceMs,
      );
      await exited;
      clearTimeout(timer);
    },
  };
}
