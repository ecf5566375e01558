import { isCluster } from "../../redis/command-deadlines.js";
import type { RedisClient } from "../../redis/redis-client.js";
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
    acknowledged = await waitOn(task, minReplicas, waitMs);
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

async function waitOn(task: CreatedTask, replicas: number, waitMs: number): Promise<number> {
  const { client } = task;
  if (!isCluster(client)) return Number(await client.call("WAIT", replicas, waitMs));
  // A pipeline goes to the node of its keyed command's slot: WAIT rides along on that connection.
  const results =
    (await client.pipeline().exists(task.key).call("WAIT", replicas, waitMs).exec()) ?? [];
  const [err, answer] = results[1] ?? [new Error("no answer to WAIT"), 0];
  if (err) throw err;
  return Number(answer);
}
