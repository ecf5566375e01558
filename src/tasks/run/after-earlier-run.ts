import type { HANDOVER, TaskLease } from "../core/task-queue.js";
import { untilAborted } from "./until-aborted.js";

/** The runs going on in one process, by task id (see {@link afterEarlierRunHere}). */
export type LeaseRuns = Map<string, Promise<typeof HANDOVER | void>>;

/**
 * Runs `run` once no earlier run of the same task is going on in this
 * process. A lease can lapse while its run lives (a store outage or a Redis
 * failover outlasting it), and the queue hands the task out again, here as
 * well as on another replica. The earlier run may hold its channel's answer
 * and be writing the task's end again (`TaskFinisher.complete`, or with
 * `store.minReplicas` waiting for replicas to hold it): here it is known to
 * be alive, so the new run waits for it to settle instead of for a time
 * (`rerunGraceMs`, which a loaded machine can outlast), then reads the task
 * as it left it: ended, no second generation. Seen in CI on a Sentinel
 * failover.
 */
export async function afterEarlierRunHere(
  runs: LeaseRuns,
  lease: TaskLease,
  run: () => Promise<typeof HANDOVER | void>,
): Promise<typeof HANDOVER | void> {
  const earlier = runs.get(lease.taskId);
  const current = (async () => {
    if (earlier) {
      await untilAborted(earlier, lease.signal).catch(() => undefined);
      if (lease.signal.aborted) return;
    }
    return run();
  })();
  runs.set(lease.taskId, current);
  try {
    return await current;
  } finally {
    if (runs.get(lease.taskId) === current) runs.delete(lease.taskId);
  }
}
