import type { RedisClient } from "../../redis/redis-client.js";
import { countConnections, waitForReplicas } from "../../redis/redis-topologies.js";
import { storeUnavailable } from "../../errors/store-unavailable.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";

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
  /** The waiter's connection count when the task's write was answered (see {@link ReplicaWaiter}). */
  sentOn: number;
  /** The waiter the store's steps share: whose connection count `WAIT`'s answer is read against. */
  waiter: ReplicaWaiter;
  /** Fails the task `cancelled` (it never runs) and frees its idempotency key. */
  cancel(keepMs: number): Promise<void>;
}

/**
 * Waits until `minReplicas` Redis replicas hold what this connection wrote
 * (`WAIT`, on the connection that wrote the task: the master's, or on a
 * cluster the one of the node serving the task's slot). When they do not
 * confirm in time the task is cancelled, so it never runs, and this rejects
 * with `store_unavailable`: the submission answers 503 and a retry makes no
 * second image. An answer over a connection made after the task was written
 * (to a master promoted meanwhile) confirms nothing: see {@link ReplicaWaiter}.
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
  if (acknowledged >= minReplicas && task.waiter.connection() === task.sentOn) return;
  await task.cancel(confirmation.keepCancelledMs).catch(() => undefined);
  throw storeUnavailable(
    new Error(
      acknowledged < 0
        ? "WAIT failed"
        : `${acknowledged} of ${minReplicas} Redis replicas confirmed the task in ${waitMs} ms`,
    ),
  );
}

/**
 * Which transitions must outlive a failover. `"run"`: a step by a run
 * (`attempts`: its attempt number): its claim (a new attempt), the id of its
 * channel's job (lost, the next run would submit the generation again: a
 * second paid image) or its end; the run waits for replicas to confirm it
 * (see {@link keepRunStepOnReplicas}). `"end"`: an end written by no run (a
 * cancel): lost, the task would run again after its client was told it
 * ended; kept the same way, but its writer does not wait (a cancel is
 * answered at once). Undefined for any other write.
 */
export function stepToKeep(
  current: TaskRecord,
  next: TaskRecord,
  attempts: number | undefined,
): "run" | "end" | undefined {
  if (attempts === undefined) {
    return isFinished(next.status) && !isFinished(current.status) ? "end" : undefined;
  }
  return isFinished(next.status) ||
    next.attempts !== current.attempts ||
    next.upstream?.id !== current.upstream?.id
    ? "run"
    : undefined;
}

/**
 * How long a run's step (its claim, its job id, its end) is waited for on replicas (and
 * written again when a failover took it back) before it is left as the
 * primary has it.
 */
const STEP_CONFIRM_MS = 60_000;
/** The pause between two looks while replicas do not confirm a run's step. */
const STEP_RECHECK_MS = 500;
/**
 * `WAIT`'s own deadline for runs' steps: a replica that is up acknowledges
 * within milliseconds, and while none is, each look holds the connection
 * (every store command behind it) this long at most.
 */
const STEP_WAIT_MS = 250;

/**
 * The `WAIT` that confirms runs' steps: one at a time on the store's
 * connection, shared by every step written before it was sent (a `WAIT`
 * covers every write its connection sent before it). However many runs
 * start or end while replicas are away, the connection is held by one
 * `WAIT` at a time. `routeKey`: a key of the deployment, where a cluster
 * sends it.
 */
export function createReplicaWaiter(
  client: RedisClient,
  routeKey: string,
  minReplicas: number,
): ReplicaWaiter {
  let next: Promise<number> | undefined;
  let sent: Promise<unknown> = Promise.resolve();
  const connection = countConnections(client);
  return {
    minReplicas,
    connection,
    wait: () =>
      (next ??= sent.then(() => {
        next = undefined;
        const acknowledged = waitForReplicas(client, routeKey, minReplicas, STEP_WAIT_MS);
        sent = acknowledged.catch(() => undefined);
        return acknowledged;
      })),
  };
}

/** See {@link createReplicaWaiter}. */
export interface ReplicaWaiter {
  /** Replicas that must acknowledge (`store.minReplicas`). */
  minReplicas: number;
  /** Resolves how many replicas acknowledged every write sent before it. */
  wait(): Promise<number>;
  /**
   * How many connections the store's client has made so far. Read as a
   * command's answer arrives, it names the connection that answered (a new
   * connection is counted before it answers anything). A `WAIT` answered
   * over another connection than a write's says nothing of that write: after
   * a failover the client's new connection (to the promoted master) has
   * written nothing, and `WAIT` answers at once with every replica attached,
   * whether the promoted master got the write or not.
   */
  connection(): number;
}

/** A run's step just written, as {@link keepRunStepOnReplicas} needs it. */
export interface RunStepWrite {
  client: RedisClient;
  /** The record's key. */
  key: string;
  /** The record's entry as the step wrote it. */
  text: string;
  /** The waiter's connection count when the step's write was answered (see {@link ReplicaWaiter}). */
  sentOn: number;
  /** Whether an entry read now is the record as it was before the step (a failover lost it). */
  isBefore(text: string): boolean;
  /**
   * Writes the step again over the record as it was before (compare-and-set);
   * whether it was. Absent for a claim: a failover that lost the claim lost
   * the queue's hold on the job with it (BullMQ's lock, written just before),
   * so a run that went on would lose its lease mid-generation and the task
   * would be generated again; the run hands the task back instead.
   */
  rewrite?(): Promise<boolean>;
}

/**
 * Waits until `minReplicas` Redis replicas hold a run's step (`WAIT`,
 * through `waiter`: see {@link createReplicaWaiter}): its claim, before it
 * calls a channel, and its end. A failover right after cannot take it back:
 * a lost claim has the task run by another run while this one generates (one
 * of the two images thrown away), a lost end has it run again (paid twice) or
 * its job finish with the task still in progress. While they do not confirm
 * it, the record is read again: still this step, it is waited for again (on
 * whichever primary holds it now); back as it was before (the promoted
 * replica never had it), the step is written again (a claim is not: this
 * resolves false, see {@link RunStepWrite.rewrite}); anything else (a cancel,
 * another run) won, and this resolves false. A confirmation over a
 * connection made after the step was sent is read the same way (see
 * {@link ReplicaWaiter.connection}). Past {@link STEP_CONFIRM_MS} the step
 * stays as the primary has it (true), as without `store.minReplicas`.
 */
export async function keepRunStepOnReplicas(
  waiter: ReplicaWaiter,
  write: RunStepWrite,
): Promise<boolean> {
  const until = Date.now() + STEP_CONFIRM_MS;
  let sentOn = write.sentOn;
  for (;;) {
    const acknowledged = await waiter.wait().catch(() => -1);
    if (Date.now() >= until) return true;
    if (acknowledged >= waiter.minReplicas) {
      if (waiter.connection() === sentOn) return true;
      // Answered over a newer connection: whether the primary now has the step, only a read says.
    } else {
      await new Promise((resolve) => setTimeout(resolve, STEP_RECHECK_MS).unref());
    }
    let now: string | null;
    try {
      now = await write.client.get(write.key);
    } catch {
      continue; // the store is away: wait for it
    }
    const readOn = waiter.connection(); // the connection the read was answered on
    if (now === write.text) {
      // The primary read holds the step: replicas that confirm this connection's writes hold it.
      sentOn = readOn;
      continue;
    }
    if (now === null || !write.isBefore(now) || !write.rewrite) return false;
    try {
      if (!(await write.rewrite())) return false;
      sentOn = waiter.connection();
    } catch {
      // the store went away again: look again
    }
  }
}
