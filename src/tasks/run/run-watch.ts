import type { LeaseEnd } from "../core/task-queue.js";
import type { TaskStore } from "../core/task-store.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";
import type { AbortReason } from "./run-failure.js";

/** The longest delay a Node timer takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A run's abort signal and what ends it. */
export interface RunWatch {
  /** Aborted with the lease's reason, `"timeout"`, or `"cancelled"`/`"lost"` found on a re-read. */
  signal: AbortSignal;
  /** Whether the run's timeout has passed, its timer fired or not. */
  pastDeadline(): boolean;
  dispose(): void;
}

/**
 * Bounds one run: its lease's signal, its own timeout from now, and a re-read
 * of the task every `checkEveryMs`, which stops a run whose task another
 * process finished (a cancel whose message was lost) or gave to another run.
 */
export function watchRun(options: {
  store: TaskStore;
  started: TaskRecord;
  leaseSignal: AbortSignal;
  timeoutMs: number;
  checkEveryMs: number;
}): RunWatch {
  const { store, started } = options;
  const own = new AbortController();
  const deadline = performance.now() + options.timeoutMs;
  // Node fires a timer over 2^31-1 ms (24.8 days) at once, so a longer timeout is capped.
  const timer = setTimeout(
    () => own.abort("timeout" satisfies AbortReason),
    Math.min(options.timeoutMs, MAX_TIMER_MS),
  );
  const check = setInterval(() => {
    store.get(started.id).then(
      (current) => {
        if (current?.status !== "in_progress" || current.attempts !== started.attempts) {
          own.abort((isFinished(current?.status ?? "failed") ? "cancelled" : "lost") as LeaseEnd);
        }
      },
      () => undefined, // the store is away; the lease decides
    );
  }, options.checkEveryMs);
  return {
    signal: AbortSignal.any([options.leaseSignal, own.signal]),
    pastDeadline: () => performance.now() >= deadline,
    dispose() {
      clearTimeout(timer);
      clearInterval(check);
    },
  };
}
