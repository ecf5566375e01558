import { availableParallelism, loadavg } from "node:os";

/*
 * How much slower than an idle machine this run may be. The suite runs on
 * shared machines (CI beside other jobs, a laptop compiling): deadlines that
 * fit an idle machine fail a loaded one, and leases shorter than the event
 * loop's stalls lapse under a live process. Every deadline a test sets
 * (its own timeout, a wait for a task, a lease) goes through `slow()`.
 *
 * `TEST_TIME_FACTOR` sets it; else it follows the load (the one-minute load
 * average) when the test file started: 1 on an idle machine, up to 4 when
 * the load average is several times the cores. A test that passes only
 * because of a large factor still fails when something hangs, only later.
 */
export let TIME_FACTOR = factorOf(process.env.TEST_TIME_FACTOR);

/**
 * Reads the load again, before each test file (test/support/time-factor-setup.ts): a worker runs
 * many files in one module graph (`isolate: false`), and the load when its first file started
 * is that of CI's build, not of the two suites it then runs beside. Read once, the factor stayed
 * about 1.5 under a load that stretched a 20 ms drawing to 2.8 s.
 */
export function refreshTimeFactor(): void {
  TIME_FACTOR = factorOf(process.env.TEST_TIME_FACTOR);
}

function factorOf(setting: string | undefined): number {
  const set = Number(setting);
  if (setting !== undefined && Number.isFinite(set) && set >= 1) return set;
  const load = (loadavg()[0] ?? 0) / availableParallelism();
  return Math.min(4, Math.max(1, 1 + load / 2));
}

/** A deadline of `ms` on an idle machine, as this run's load stretches it. */
export function slow(ms: number): number {
  return Math.round(ms * TIME_FACTOR);
}

/**
 * A setting in whole seconds (a task's `timeoutSec` or `retentionSec`, say) of `seconds` on an
 * idle machine, as this run's load stretches it: rounded up, so never below `seconds`.
 */
export function slowSec(seconds: number): number {
  return Math.ceil(seconds * TIME_FACTOR);
}

/** A lease (`imageTasks.leaseSec`) a test asks for, kept above the event loop's stalls. */
export function leaseSec(seconds: number): number {
  return slowSec(seconds);
}
