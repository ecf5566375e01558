import type { Logger } from "pino";
import type { CredentialSealer } from "../../auth/credential-sealer.js";
import { createChannelClient, type ChannelClient } from "../../channels/channel-client.js";
import type { Config } from "../../config/config-schema.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { ModelAccess } from "../../models/model-access.js";
import { NOOP_SPAN, NOOP_TRACER, type Tracer } from "../../tracing/tracer.js";
import type { ResponseEventLog } from "../core/response-state.js";
import { ALWAYS_AVAILABLE, type StoreAvailability } from "../core/store-availability.js";
import { HANDOVER, type TaskLease } from "../core/task-queue.js";
import { isFinished, startedMsOf, type TaskRecord } from "../core/task-record.js";
import type { TaskStore } from "../core/task-store.js";
import type { TaskImages } from "../images/task-images.js";
import type { RunEnd, TaskFinisher } from "../service/task-finisher.js";
import { claimTask, type ClaimDeps } from "./claim-task.js";
import { createImageRunStep } from "./image-run-step.js";
import { createResponseRunStep } from "./response-run-step.js";
import { settleRunFailure, type RunFailureDeps } from "./run-failure.js";
import { stepKindOf, type RunSteps, type RunTelemetry } from "./run-step.js";
import { endingSignal, watchRun } from "./run-watch.js";
import type { KeyValue } from "../../collections/key-value.js";
import { afterEarlierRunHere, type LeaseRuns } from "./after-earlier-run.js";

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
  /** Background responses' stream events (the backend's log). */
  responseEvents: ResponseEventLog;
  /**
   * The configured channels (`channels`): those with `async` start with their
   * submission and poll counters at 0.
   */
  channels?: ReadonlyArray<{ name: string; async?: string | undefined }>;
  /**
   * How often a run re-reads its task: a task that another process finished
   * (a cancel whose message was lost) or gave to another run stops here too.
   * Default 5 s.
   */
  checkEveryMs?: number;
  /**
   * How long a rerun waits for the run it replaces to write the task's end
   * (see `claimTask`): on a shared store, whose leases a store outage can
   * outlast while their runs live. Default 0.
   */
  rerunGraceMs?: number;
  /**
   * On a shared store: where a run whose lease lapsed says, every
   * `checkEveryMs`, that it goes on paying for its generation, and where a
   * rerun elsewhere looks before it makes the generation again (see
   * `watchRun`, `claimTask`). Absent: no marks.
   */
  aliveMarks?: KeyValue | undefined;
}

/** Runs tasks the queue hands over, one lease each. */
export interface TaskRunner {
  /** Resolves `HANDOVER` when the run gave its task back to the queue (see `TaskHandler`). */
  run(lease: TaskLease): Promise<typeof HANDOVER | void>;
  close(): Promise<void>;
}

/**
 * Runs one task under its lease: `queued -> in_progress` (a new run of a
 * task whose earlier run ended with its holder, until `maxAttempts`), the
 * channel call bounded by the timeout and the lease, then `completed` or
 * `failed`. Only the run holding the lease writes the end (`attempts` names
 * it). A task's own failure never rejects; a store that cannot be written
 * does, and the queue runs the task again later; a completion is first
 * written again for a minute (see `TaskFinisher.complete`), so that a
 * generation paid for is not made twice.
 */
export function createTaskRunner(deps: TaskRunnerDeps): TaskRunner {
  const { store, finisher, metrics, logger, limits } = deps;
  const failure = { store, finisher, logger, metrics, timeoutSec: limits.timeoutSec };
  const stores = deps.stores ?? ALWAYS_AVAILABLE;
  const checkEveryMs = deps.checkEveryMs ?? 5_000;
  const shared = {
    deps,
    // The runs' own pools: a generation holds its connection for minutes.
    client: createChannelClient({ metrics, logger }),
    checkEveryMs,
    tracer: deps.tracer ?? NOOP_TRACER,
    failure,
    claim: {
      ...{ store, finisher, metrics, logger, maxAttempts: limits.maxAttempts, now: deps.now },
      ...{
        rerunGraceMs: deps.rerunGraceMs,
        aliveMarks: deps.aliveMarks,
        aliveEveryMs: checkEveryMs,
      },
    },
  };
  const s: RunnerState = { ...shared, steps: createRunSteps(shared, stores) };
  const runs: LeaseRuns = new Map();
  return {
    run: (lease) => afterEarlierRunHere(runs, lease, () => runLease(s, lease)),

    close: () => s.client.close(),
  };
}

/** One lease's run: the task read, claimed, and run to its end. */
async function runLease(s: RunnerState, lease: TaskLease): Promise<typeof HANDOVER | void> {
  const record = await s.deps.store.get(lease.taskId);
  if (!record || isFinished(record.status) || lease.signal.aborted) return;
  const started = await claimTask(s.claim, record, lease.signal);
  if (!started || started === HANDOVER) return started;
  const run = startRunTelemetry(s.tracer, started);
  try {
    return await runClaimed(s, started, lease, run);
  } finally {
    run.span.end();
  }
}

/** What the runner's parts share. */
interface RunnerState {
  deps: TaskRunnerDeps;
  client: ChannelClient;
  checkEveryMs: number;
  tracer: Tracer;
  failure: RunFailureDeps;
  claim: ClaimDeps;
  /** Each kind's run step. */
  steps: RunSteps;
}

/** The run steps of the kinds of task, on the runner's parts. */
function createRunSteps(s: Omit<RunnerState, "steps">, stores: StoreAvailability): RunSteps {
  const { deps, failure } = s;
  const writeRetryMs = deps.writeRetryMs ?? 60_000;
  const { store, finisher, metrics, logger } = deps;
  return {
    image: createImageRunStep({
      store,
      logger,
      asyncChannels: (deps.channels ?? []).filter((c) => c.async).map((c) => c.name),
      images: deps.images,
      access: deps.access,
      sealer: deps.sealer,
      client: s.client,
      metrics,
      tracer: s.tracer,
      timeoutSec: deps.limits.timeoutSec,
      stores,
      writeRetryMs,
      keep: {
        ...{ images: deps.images, finisher, logger, now: deps.now, failure, stores },
        ...{ writeRetryMs, metrics },
      },
      partials: { store, images: deps.images, finisher, metrics, logger, stores },
    }),
    response: createResponseRunStep({
      ...{ store, images: deps.images, log: deps.responseEvents, access: deps.access },
      ...{ sealer: deps.sealer, client: s.client, finisher, metrics, tracer: s.tracer, logger },
      timeoutSec: deps.limits.timeoutSec,
      runLimitSec: deps.limits.timeoutSec + deps.limits.retentionSec,
      stores,
      writeRetryMs,
    }),
  };
}

/** A claimed run: its kind's step, bounded by the lease, the timeout and a cancel. */
async function runClaimed(
  s: RunnerState,
  started: TaskRecord,
  lease: TaskLease,
  telemetry: RunTelemetry,
): Promise<typeof HANDOVER | void> {
  const { deps } = s;
  // The timeout counts from the task's start, which a poll handed over keeps.
  const startedMs = startedMsOf(started) ?? 0;
  // What the run learned of its channel goes with the end it writes (the task line).
  const end = (): RunEnd => ({ ...telemetry.report, startedMs, span: telemetry.span });
  const watch = watchRun({
    store: deps.store,
    started,
    leaseSignal: lease.signal,
    timeoutMs: startedMs + deps.limits.timeoutSec * 1000 - deps.now(),
    checkEveryMs: s.checkEveryMs,
    aliveMarks: deps.aliveMarks,
    stoppedSignal: lease.stopped,
    onLapsed: () => deps.metrics.taskLeaseLapses.inc(),
  });
  try {
    return await s.steps[stepKindOf(started)]({
      started,
      signal: watch.signal,
      paidSignal: watch.paidSignal,
      draining: lease.draining,
      pastDeadline: () => watch.pastDeadline(),
      end,
      telemetry,
      fail: (err) =>
        settleRunFailure(s.failure, started, endingSignal(watch), err, end(), watch.pastDeadline()),
    });
  } finally {
    watch.dispose();
  }
}

/**
 * The `image_task.run` span of a claimed run, in the trace its submission
 * started (wherever that was), with its first event.
 */
function startRunTelemetry(tracer: Tracer, started: TaskRecord): RunTelemetry {
  const report = { channel: undefined, upstreamStatus: undefined, tries: 0 };
  if (!tracer.enabled) return { report, span: NOOP_SPAN };
  const span = tracer.startSpan("image_task.run", {
    kind: "consumer",
    parent: started.trace,
    attributes: {
      "image_task.id": started.id,
      "image_task.attempt": started.attempts,
      "gen_ai.operation.name": started.kind === "response" ? "chat" : "image_generation",
      "gen_ai.request.model": started.model,
    },
  });
  span.addEvent("image.task.in_progress");
  return { report, span };
}
