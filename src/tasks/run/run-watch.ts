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
  /**
   * Like `signal`, but a lease that lapsed (`"lost"` from the queue) does not
   * abort it: see {@link RunContext.paidSignal}. A re-read that finds the task
   * finished or taken by another run does.
   */
  paidSignal: AbortSignal;
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
  const paid = new AbortController();
  const onOwn = () => paid.abort(own.signal.reason);
  // A lapsed lease alone does not stop a paid generation; every other end of the lease does.
  const onLease = () => {
    if ((options.leaseSignal.reason as LeaseEnd) !== "lost") paid.abort(options.leaseSignal.reason);
  };
  own.signal.addEventListener("abort", onOwn, { once: true });
  if (options.leaseSignal.aborted) onLease();
  else options.leaseSignal.addEventListener("abort", onLease, { once: true });
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
    paidSignal: paid.signal,
    pastDeadline: () => performance.now() >= deadline,
    dispose() {
      clearTimeout(timer);
      clearInterval(check);
      own.signal.removeEventListener("abort", onOwn);
      options.leaseSignal.removeEventListener("abort", onLease);
    },
  };
}
