import type { Logger } from "pino";
import type { Principal } from "../../auth/principal.js";
import type { CredentialSealer } from "../../auth/credential-sealer.js";
import type { Config } from "../../config/config-schema.js";
import { ServiceError } from "../../errors/service-error.js";
import { shuttingDown } from "../../errors/shutting-down.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { ModelAccess } from "../../models/model-access.js";
import { cancelTask } from "./cancel-task.js";
import { deleteTask } from "./delete-task.js";
import type { TaskQueue } from "../core/task-queue.js";
import { readOwnedTask } from "./read-owned-task.js";
import type { OwnedPage, TaskStore } from "../core/task-store.js";
import { listImageTasks } from "./list-image-tasks.js";
import { available } from "../../errors/store-unavailable.js";
import { submitTask, type Submitted } from "./submit-task.js";
import type { TaskFinisher } from "./task-finisher.js";
import type { TaskImages } from "../images/task-images.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";
import type { ListQuery, Submission, SubmitOptions } from "./submission.js";
import { MAX_WAIT_SEC } from "../../contract/task-contract.js";
import type { EventPosition } from "../events/event-ids.js";
import type { TaskFeed } from "../events/task-feed.js";
import { watchTaskEvents, type EventSink } from "../events/watch-task-events.js";

export type { EditInput, ListQuery, Submission, SubmitOptions } from "./submission.js";
import type { TaskWaiters } from "./task-waiters.js";
import { ALWAYS_AVAILABLE, type StoreAvailability } from "../core/store-availability.js";
import { REFUSAL_REASONS } from "../../metrics/readiness-metrics.js";

/** Dependencies of {@link createTaskService}. */
export interface TaskServiceDeps {
  config: Config;
  store: TaskStore;
  /** Where an edit's input images wait for their run. */
  images: TaskImages;
  queue: TaskQueue;
  finisher: TaskFinisher;
  access: ModelAccess;
  /** Forward mode's sealer; a forward key's task cannot be taken without it. */
  sealer?: CredentialSealer;
  metrics: Metrics;
  logger: Logger;
  /** Requests waiting for tasks to finish. */
  waiters: TaskWaiters;
  /** Every task's events this process hears (from any replica), for watchers. */
  feed: TaskFeed;
  /** Milliseconds since the epoch; injectable for expiry tests. */
  now: () => number;
  /** Whether the stores work: a submission is refused before anything else while one does not. */
  stores?: StoreAvailability;
  /** Asks for an adoption pass soon: a submitted task was written but could not be queued. */
  adoptSoon?: () => void;
}

/** Options of {@link TaskService.watch}. */
export interface WatchOptions {
  /** Where the events go: an SSE answer, an MCP tool's progress. */
  sink: EventSink;
  /** The task as the caller already read it (its owner checked): sent before the first read. */
  known?: TaskRecord;
  /** The position of the last event the watcher has; none: from the start. */
  after?: EventPosition;
  /** Told of a failure after the first event went out (the watch then ends). */
  onLateError?: (err: unknown) => void;
}

/**
 * The task API's operations, the same whatever the transport (the HTTP lanes
 * of every dialect, the MCP tools in process): submit, read, wait, watch,
 * list, cancel, delete.
 */
export interface TaskService {
  /** A task the principal owns, else 404 `task_not_found`. */
  get(principal: Principal, id: string): Promise<TaskRecord>;
  submit(principal: Principal, submission: Submission, options: SubmitOptions): Promise<Submitted>;
  /**
   * The task once it has finished, or after `waitMs` as it is then: a
   * request waiting here holds no worker slot and reads the store once
   * before, and once after unless the finish event (which carries the task)
   * ended the wait, whatever the wait. It listens for the task's
   * `finished` event (from whichever replica ends it) before its first read,
   * so a finish in between is not missed. A client that goes away
   * (`signal`) or a service that stops ends the wait at once. Waits longer
   * than `MAX_WAIT_SEC` are cut to it.
   */
  waitFor(
    principal: Principal,
    id: string,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<TaskRecord>;
  /**
   * Follows a task the principal owns until its final event, the sink's
   * signal, or the service's stop: the events its state stands for that the
   * watcher has not seen, then each one as it happens, whichever replica runs
   * the task. Another key's task rejects before anything is followed.
   */
  watch(principal: Principal, id: string, options: WatchOptions): Promise<void>;
  /**
   * A page of the principal's own tasks, newest first; `after` must be one
   * of them (an unknown one is the caller's mistake, or has expired).
   */
  list(principal: Principal, query: ListQuery): Promise<OwnedPage>;
  /**
   * Fails a queued or running task with `cancelled`; a finished one is
   * returned as it is. `reqId`: the cancelling request's, for the task line.
   */
  cancel(principal: Principal, id: string, reqId?: string): Promise<TaskRecord>;
  /**
   * Deletes a task the principal owns, with its images and every index
   * entry; a queued or running one is cancelled first. Resolves the record
   * as it was deleted; another key's task, an unknown one and one deleted
   * already are 404 `task_not_found`.
   */
  delete(principal: Principal, id: string): Promise<TaskRecord>;
  /**
   * New submissions get 503 from now on (the service is stopping), and
   * waiting requests answer at once with the task as it is.
   */
  stopAccepting(): void;
}

/**
 * Submit, read, cancel and delete, over the store and the queue. Running a task is
 * the runner's job; ending one, the finisher's.
 */
export function createTaskService(deps: TaskServiceDeps): TaskService {
  const { store, waiters } = deps;
  const stores = deps.stores ?? ALWAYS_AVAILABLE;
  const seconds = () => Math.floor(deps.now() / 1000);
  /** Set by stopAccepting(): a task accepted now would wait on a queue that no longer runs. */
  let stopping = false;
  const get = (principal: Principal, id: string) => readOwnedTask(store, principal, id, seconds());

  return {
    get,

    async submit(principal, submission, options) {
      try {
        if (stopping) throw shuttingDown();
        // Before anything else: a task that could not be kept is never sent to a channel.
        const refusal = stores.refusal();
        if (refusal) throw refusal;
        return await submitTask(deps, principal, submission, options);
      } catch (err) {
        countRefusal(deps, err);
        throw err;
      }
    },

    async waitFor(principal, id, asked, signal) {
      const waitMs = Math.min(asked, MAX_WAIT_SEC * 1000);
      if (!(waitMs > 0)) return get(principal, id);
      const watch = waiters.watch(id);
      const deadline = performance.now() + waitMs;
      try {
        await available(() => watch.ready);
        let record = await get(principal, id);
        for (;;) {
          if (isFinished(record.status)) return record;
          const why = await watch.until(Math.max(0, deadline - performance.now()), signal);
          // Nobody is left to answer: no need to read again.
          if (why === "aborted") return record;
          // The finish event carries the task as it ended: no read of the store.
          const heard = why === "finished" ? watch.finished : undefined;
          if (heard?.owner === principal.subject && heard.id === id) return heard;
          record = await get(principal, id);
          // The bus was cut off: the finish may have been missed, and the read tells.
          if (why !== "resync" || performance.now() >= deadline) return record;
        }
      } finally {
        watch.dispose();
      }
    },

    async watch(principal, id, options) {
      // The owner check comes first: another key's watch follows (subscribes to) nothing.
      const known = options.known ?? (await get(principal, id));
      await watchTaskEvents({
        taskId: id,
        feed: deps.feed,
        read: () => get(principal, id),
        known,
        sink: options.sink,
        ...(options.after ? { after: options.after } : {}),
        ...(options.onLateError ? { onLateError: options.onLateError } : {}),
      });
    },

    async list(principal, query) {
      const page = await available(() =>
        listImageTasks(store, principal.subject, { ...query, nowSec: seconds() }),
      );
      if (!page) {
        throw new ServiceError(
          "invalid_value",
          `Invalid 'after': no task '${(query.after ?? "").slice(0, 80)}' among this key's tasks (it may have expired).`,
          { param: "after" },
        );
      }
      return page;
    },

    async cancel(principal, id, reqId) {
      return cancelTask(deps, await get(principal, id), reqId);
    },

    async delete(principal, id) {
      return deleteTask(deps, await get(principal, id));
    },

    stopAccepting() {
      stopping = true;
      waiters.release();
    },
  };
}

/** Counts a refused submission by its bounded reason; a store failure also checks it again. */
function countRefusal(deps: TaskServiceDeps, err: unknown): void {
  if (!(err instanceof ServiceError)) return;
  const reason = err.code === "service_unavailable" ? "shutting_down" : err.code;
  if (!REFUSAL_REASONS.has(reason)) return;
  deps.metrics.taskSubmissionsRefused.inc({ reason });
  if (reason === "store_unavailable") deps.stores?.storeFailed();
  if (reason === "storage_unavailable") deps.stores?.imagesFailed();
}
