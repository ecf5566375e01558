import type { Logger } from "pino";
import type { CredentialSealer } from "../../auth/credential-sealer.js";
import { createChannelClient } from "../../channels/channel-client.js";
import type { Config } from "../../config/config-schema.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { ModelAccess } from "../../models/model-access.js";
import { claimTask } from "./claim-task.js";
import { keepPartials } from "./keep-partials.js";
import { keepResult } from "./keep-result.js";
import type { GeneratedImage } from "../core/generated-image.js";
import { generateImages, type EditFile } from "./generate-images.js";
import type { TaskLease } from "../core/task-queue.js";
import { settleRunFailure } from "./run-failure.js";
import { assertEditFilesKept, openCredential, readEditFiles } from "./run-inputs.js";
import { watchRun } from "./run-watch.js";
import type { TaskStore } from "../core/task-store.js";
import { TaskFailure } from "../core/task-failure.js";
import type { TaskFinisher } from "../service/task-finisher.js";
import type { TaskImages } from "../images/task-images.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";
import { ALWAYS_AVAILABLE, type StoreAvailability } from "../core/store-availability.js";
import { awaitImageStore } from "./await-image-store.js";

/** How much longer than the task's timeout the channel's silence timer runs. */
const IDLE_MARGIN_MS = 5_000;

/** Dependencies of {@link createTaskRunner}. */
export interface TaskRunnerDeps {
  store: TaskStore;
  /** Where a run reads an edit's input images and writes its result's. */
  images: TaskImages;
  /** Routes a run to its channels: their own keys, or a forward task's gateway with its key. */
  access: ModelAccess;
  /** Forward mode's sealer, to open a task's `sealedCredential`; absent when forward mode is off. */
  sealer?: CredentialSealer;
  finisher: TaskFinisher;
  metrics: Metrics;
  logger: Logger;
  limits: Config["imageTasks"];
  now: () => number;
  /** Whether the image store works: a run waits for it before it calls a channel. */
  stores?: StoreAvailability;
  /** `images.writeRetrySec` in milliseconds: how long a run waits for the image store. Default 60 s. */
  writeRetryMs?: number;
  /**
   * How often a run re-reads its task: a task that another process finished
   * (a cancel whose message was lost) or gave to another run stops here too.
   * Default 5 s.
   */
  checkEveryMs?: number;
}

/** Runs tasks the queue hands over, one lease each. */
export interface TaskRunner {
  run(lease: TaskLease): Promise<void>;
  close(): Promise<void>;
}

/**
 * Runs one task under its lease: `queued -> in_progress` (a new run of a
 * task whose earlier run ended with its holder, until `maxAttempts`), the
 * channel call bounded by the timeout and the lease, then `completed` or
 * `failed`. Only the run holding the lease writes the end (`attempts` names
 * it). A task's own failure never rejects; a store that cannot be written
 * does, and the queue runs the task again later.
 */
export function createTaskRunner(deps: TaskRunnerDeps): TaskRunner {
  const { store, finisher, metrics, logger, limits } = deps;
  // The runs' own pools: a generation holds its connection for minutes.
  const client = createChannelClient({ metrics, logger });
  const checkEveryMs = deps.checkEveryMs ?? 5_000;
  const failureDeps = { store, finisher, logger, timeoutSec: limits.timeoutSec };
  const claimDeps = {
    store,
    finisher,
    metrics,
    logger,
    maxAttempts: limits.maxAttempts,
    now: deps.now,
  };

  async function generate(started: TaskRecord, files: EditFile[] | undefined, signal: AbortSignal) {
    const candidates = deps.access.route(started.model, await openCredential(deps.sealer, started));
    if (candidates.length === 0) {
      throw new TaskFailure("upstream_unavailable", "No channel serves this model any more.");
    }
    assertEditFilesKept(files);
    const { partialImages } = started;
    return generateImages({
      candidates,
      body: started.request,
      ...(files ? { files } : {}),
      signal,
      // The task's own deadline ends the call; the channel's silence timer only backs it up,
      // so it must never fire first (undici's timers are coarse): a timeout is always `timeout`.
      idleMs: limits.timeoutSec * 1000 + IDLE_MARGIN_MS,
      client,
      ...(partialImages
        ? { stream: { partialImages, onPartial: keepPartials(partialDeps, started, signal) } }
        : {}),
    });
  }

  const stores = deps.stores ?? ALWAYS_AVAILABLE;
  const writeRetryMs = deps.writeRetryMs ?? 60_000;
  const keepDeps = {
    ...{ images: deps.images, finisher, logger, now: deps.now },
    ...{ failure: failureDeps, stores, writeRetryMs },
  };
  const partialDeps = { store, images: deps.images, finisher, metrics, logger, stores };

  return {
    async run(lease) {
      const record = await store.get(lease.taskId);
      if (!record || isFinished(record.status) || lease.signal.aborted) return;
      const started = await claimTask(claimDeps, record);
      if (!started) return;
      const files = await readEditFiles(deps.images, started);
      const watch = watchRun({
        store,
        started,
        leaseSignal: lease.signal,
        timeoutMs: limits.timeoutSec * 1000,
        checkEveryMs,
      });
      try {
        let result: { images: GeneratedImage[]; usage?: unknown };
        try {
          // A task whose images could not be kept is never sent to a channel.
          await awaitImageStore(stores, watch.signal, writeRetryMs);
          result = await generate(started, files, watch.signal);
        } catch (err) {
          await settleRunFailure(failureDeps, started, watch.signal, err, watch.pastDeadline());
          return;
        }
        await keepResult(keepDeps, started, result, watch.signal);
      } finally {
        watch.dispose();
      }
    },

    close: () => client.close(),
  };
}
