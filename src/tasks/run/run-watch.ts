import type { LeaseEnd } from "../core/task-queue.js";
import type { KeyValue } from "../../collections/key-value.js";
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
 * Once the lease lapsed (the queue's `lost`) while the run goes on paying for
 * its generation, each look first sets the run's mark in `aliveMarks` (for
 * three looks' time), so that a rerun the queue starts elsewhere waits for
 * this run (see `claim-task.ts`); the mark goes when the run ends.
 */
export function watchRun(options: {
  store: Pick<TaskStore, "get">;
  started: TaskRecord;
  leaseSignal: AbortSignal;
  timeoutMs: number;
  checkEveryMs: number;
  aliveMarks?: Pick<KeyValue, "set" | "delete"> | undefined;
  /** `TaskLease.stopped`: ends the paid part of a run whose lease lapsed. */
  stoppedSignal?: AbortSignal | undefined;
  /** Told once, when the run's lease lapsed (`task_lease_lapses_total`). */
  onLapsed?: (() => void) | undefined;
}): RunWatch {
  const { leaseSignal } = options;
  const own = new AbortController();
  const deadline = performance.now() + options.timeoutMs;
  // Node fires a timer over 2^31-1 ms (24.8 days) at once, so a longer timeout is capped.
  const timer = setTimeout(
    () => own.abort("timeout" satisfies AbortReason),
    Math.min(options.timeoutMs, MAX_TIMER_MS),
  );
  const paid = new AbortController();
  // `lapsed`: the lease was lost (the run sets its mark); `ended`: the run is over (the mark goes).
  const state = { lapsed: false, ended: false };
  const look = () => lookAtTask(options, own, state).catch(() => undefined); // the store is away
  const onOwn = () => paid.abort(own.signal.reason);
  // A lapsed lease alone does not stop a paid generation; every other end of the lease does.
  const onLease = () => {
    if ((leaseSignal.reason as LeaseEnd) !== "lost") return paid.abort(leaseSignal.reason);
    state.lapsed = true;
    options.onLapsed?.();
    if (options.stoppedSignal?.aborted) paid.abort(options.stoppedSignal.reason);
    void look();
  };
  // Only a run whose lease lapsed: any other hears the stop through its lease, as the queue
  // needs (a run that ended before its lease's hand-back would see its job completed).
  const onStopped = () => {
    if (state.lapsed) paid.abort(options.stoppedSignal?.reason);
  };
  own.signal.addEventListener("abort", onOwn, { once: true });
  options.stoppedSignal?.addEventListener("abort", onStopped, { once: true });
  if (leaseSignal.aborted) onLease();
  else leaseSignal.addEventListener("abort", onLease, { once: true });
  const check = setInterval(look, options.checkEveryMs);
  return {
    signal: AbortSignal.any([leaseSignal, own.signal]),
    paidSignal: paid.signal,
    pastDeadline: () => performance.now() >= deadline,
    dispose() {
      clearTimeout(timer);
      clearInterval(check);
      own.signal.removeEventListener("abort", onOwn);
      leaseSignal.removeEventListener("abort", onLease);
      options.stoppedSignal?.removeEventListener("abort", onStopped);
      state.ended = true;
      if (state.lapsed) void dropMark(options);
    },
  };
}

/**
 * The signal whose reason says how a run ends: its paid part's once
 * something ended that (a run whose lease lapsed ends as that says), else
 * its own.
 */
export function endingSignal(run: { signal: AbortSignal; paidSignal: AbortSignal }): AbortSignal {
  return run.paidSignal.aborted ? run.paidSignal : run.signal;
}

/** The key of a run's mark in `aliveMarks`: its task and attempt. */
export function aliveMarkOf(record: Pick<TaskRecord, "id" | "attempts">): string {
  return `${record.id}:${record.attempts}`;
}

/**
 * One look at the run's task: its mark set first once its lease lapsed;
 * aborts `own` when another process finished the task or another run holds
 * it.
 */
async function lookAtTask(
  options: Parameters<typeof watchRun>[0],
  own: AbortController,
  state: { lapsed: boolean; ended: boolean },
): Promise<void> {
  const { store, started, aliveMarks } = options;
  if (own.signal.aborted || state.ended) return;
  if (state.lapsed && aliveMarks) {
    await aliveMarks.set(aliveMarkOf(started), 1, 3 * options.checkEveryMs);
    // Set as the run ended: the delete may have gone first, so it goes again.
    if (state.ended) return dropMark(options);
  }
  const current = await store.get(started.id);
  if (current?.status !== "in_progress" || current.attempts !== started.attempts) {
    own.abort((isFinished(current?.status ?? "failed") ? "cancelled" : "lost") as LeaseEnd);
  }
}

/** Deletes the run's mark; a store that is away lets it expire. */
function dropMark(options: Parameters<typeof watchRun>[0]): Promise<void> {
  return (options.aliveMarks?.delete(aliveMarkOf(options.started)) ?? Promise.resolve()).catch(
    () => undefined,
  );
}
