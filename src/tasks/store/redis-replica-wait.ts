import type { RedisClient } from "../../redis/redis-client.js";
import { waitForReplicas } from "../../redis/redis-topologies.js";
import { storeUnavailable } from "../../errors/store-unavailable.js";

/** `store.minReplicas` and how long to wait for them. */
export interface ReplicaConfirmation {
  /** Replicas that must hold a new task (1 or more). */
  minReplicas: number;
  /** How long `WAIT` waits, in ms (within `store.commandTimeoutSec`). */
  waitMs: number;
  /** How long a cancelled task is kept, in ms (as a finished one). */
  keepCancelledMs: number;
}

/** A task just written, as {@link confirmOnReplicas} needs it. */
export interface CreatedTask {
  client: RedisClient;
  /** The record's key: on a cluster, `WAIT` goes to the node that serves its slot. */
  key: string;
  /** Fails the task `cancelled` (it never runs) and frees its idempotency key. */
  cancel(keepMs: number): Promise<void>;
}

/**
 * Waits until `minReplicas` Redis replicas hold what this connection wrote
 * (`WAIT`, on the connection that wrote the task: the master's, or on a
 * cluster the one of the node serving the task's slot). When they do not
 * confirm in time the task is cancelled, so it never runs, and this rejects
 * with `store_unavailable`: the submission answers 503 and a retry makes no
 * second image.
 */
export async function confirmOnReplicas(
  confirmation: ReplicaConfirmation,
  task: CreatedTask,
): Promise<void> {
  const { minReplicas, waitMs } = confirmation;
  let acknowledged = 0;
  try {
    acknowledged = await waitForReplicas(task.client, task.key, minReplicas, waitMs);
  } catch {
    acknowledged = -1;
  }
  if (acknowledged >= minReplicas) return;
  await task.cancel(confirmation.keepCancelledMs).catch(() => undefined);
  throw storeUnavailable(
    new Error(
      acknowledged < 0
        ? "WAIT failed"
        : `${acknowledged} of ${minReplicas} Redis replicas confirmed the task in ${waitMs} ms`,
    ),
  );
}
