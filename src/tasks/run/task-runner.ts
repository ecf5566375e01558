import type { Logger } from "pino";
import type { CredentialSealer } from "../../auth/credential-sealer.js";
import { createChannelClient, type ChannelClient } from "../../channels/channel-client.js";
import type { Config } from "../../config/config-schema.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { ModelAccess } from "../../models/model-access.js";
import { claimTask, type ClaimDeps } from "./claim-task.js";
import { keepPartials, type KeepPartialsDeps } from "./keep-partials.js";
import { keepResult, type KeepResultDeps } from "./keep-result.js";
import type { GeneratedImage } from "../core/generated-image.js";
import { generateImages, type EditFile } from "./generate-images.js";
import type { TaskLease } from "../core/task-queue.js";
import { settleRunFailure, type RunFailureDeps } from "./run-failure.js";
import { assertEditFilesKept, openCredential, readEditFiles } from "./run-inputs.js";
import { watchRun } from "./run-watch.js";
import type { TaskStore } from "../core/task-store.js";
import { TaskFailure } from "../core/task-failure.js";
import type { RunEnd, TaskFinisher } from "../service/task-finisher.js";
import { createCallObserver, type CallReport } from "../../observability/create-call-observer.js";
import { NOOP_SPAN, NOOP_TRACER, type Span, type Tracer } from "../../tracing/tracer.js";
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
  /** Each run's span, in its task's trace. Default: tracing off. */
  tracer?: Tracer;
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
  const failure = { store, finisher, logger, timeoutSec: limits.timeoutSec };
  const stores = deps.stores ?? ALWAYS_AVAILABLE;
  const writeRetryMs = deps.writeRetryMs ?? 60_000;
  const s: RunnerState = {
    deps,
    // The runs' own pools: a generation holds its connection for minutes.
    client: createChannelClient({ metrics, logger }),
    checkEveryMs: deps.checkEveryMs ?? 5_000,
    tracer: deps.tracer ?? NOOP_TRACER,
    failure,
    claim: { store, finisher, metrics, logger, maxAttempts: limits.maxAttempts, now: deps.now },
    stores,
    writeRetryMs,
    keep: { images: deps.images, finisher, logger, now: deps.now, failure, stores, writeRetryMs },
    partials: { store, images: deps.images, finisher, metrics, logger, stores },
  };
  return {
    async run(lease) {
      const record = await store.get(lease.taskId);
      if (!record || isFinished(record.status) || lease.signal.aborted) return;
      const started = await claimTask(s.claim, record);
      if (!started) return;
      const run = startRunTelemetry(s.tracer, started);
      try {
        await runClaimed(s, started, lease, run);
      } finally {
        run.span.end();
      }
    },

    close: () => s.client.close(),
  };
}

/** What the runner's steps share. */
interface RunnerState {
  deps: TaskRunnerDeps;
  client: ChannelClient;
  checkEveryMs: number;
  tracer: Tracer;
  failure: RunFailureDeps;
  stores: StoreAvailability;
  writeRetryMs: number;
  claim: ClaimDeps;
  keep: KeepResultDeps;
  partials: KeepPartialsDeps;
}

/** A claimed run: the channel call, then its result kept or its failure written. */
async function runClaimed(
  s: RunnerState,
  started: TaskRecord,
  lease: TaskLease,
  run: RunTelemetry,
): Promise<void> {
  const { deps } = s;
  // What the run learned of its channel goes with the end it writes (the task line).
  const startedMs = deps.now();
  const end = (): RunEnd => ({ ...run.report, startedMs, span: run.span });
  const files = await readEditFiles(deps.images, started);
  const watch = watchRun({
    store: deps.store,
    started,
    leaseSignal: lease.signal,
    timeoutMs: deps.limits.timeoutSec * 1000,
    checkEveryMs: s.checkEveryMs,
  });
  try {
    let result: { images: GeneratedImage[]; usage?: unknown };
    try {
      // A task whose images could not be kept is never sent to a channel.
      await awaitImageStore(s.stores, watch.signal, s.writeRetryMs);
      result = await generate(s, started, files, watch.signal, run);
    } catch (err) {
      await settleRunFailure(s.failure, started, watch.signal, err, end(), watch.pastDeadline());
      return;
    }
    await keepResult(s.keep, started, result, watch.signal, end());
  } finally {
    watch.dispose();
  }
}

/** The channel call of a run: its candidates, its body and files, its partial images kept. */
async function generate(
  s: RunnerState,
  started: TaskRecord,
  files: EditFile[] | undefined,
  signal: AbortSignal,
  run: RunTelemetry,
): Promise<{ images: GeneratedImage[]; usage?: unknown }> {
  const { deps } = s;
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
    idleMs: deps.limits.timeoutSec * 1000 + IDLE_MARGIN_MS,
    client: s.client,
    observer: createCallObserver({
      report: run.report,
      operation: "image_generation",
      model: started.model,
      // The model passed the task's checks: one a channel serves, a bounded label.
      modelLabel: started.model,
      parent: run.span,
      tracer: s.tracer,
      metrics: deps.metrics,
    }),
    ...(partialImages
      ? {
          stream: {
            partialImages,
            onPartial: keepPartials(s.partials, started, signal, run.span),
          },
        }
      : {}),
  });
}

/** What a run reports: its channel tries (for the task line) and its span. */
interface RunTelemetry {
  report: CallReport;
  span: Span;
}

/**
 * The `image_task.run` span of a claimed run, in the trace its submission
 * started (wherever that was), with its first event.
 */
function startRunTelemetry(tracer: Tracer, started: TaskRecord): RunTelemetry {
  const report: CallReport = { channel: undefined, upstreamStatus: undefined, tries: 0 };
  if (!tracer.enabled) return { report, span: NOOP_SPAN };
  const span = tracer.startSpan("image_task.run", {
    kind: "consumer",
    parent: started.trace,
    attributes: {
      "image_task.id": started.id,
      "image_task.attempt": started.attempts,
      "gen_ai.operation.name": "image_generation",
      "gen_ai.request.model": started.model,
    },
  });
  span.addEvent("image.task.in_progress");
  return { report, span };
}
