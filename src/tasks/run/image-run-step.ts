import type { Logger } from "pino";
import type { CredentialSealer } from "../../auth/credential-sealer.js";
import type { Channel } from "../../channels/channel.js";
import type { ChannelClient } from "../../channels/channel-client.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import { ASYNC_POLL_OUTCOMES, ASYNC_SUBMISSION_OUTCOMES } from "../../metrics/upstream-metrics.js";
import type { ModelAccess } from "../../models/model-access.js";
import { imageCallObserver } from "./image-call-observer.js";
import type { Tracer } from "../../tracing/tracer.js";
import type { GeneratedImage } from "../core/generated-image.js";
import type { StoreAvailability } from "../core/store-availability.js";
import { TaskFailure } from "../core/task-failure.js";
import type { TaskRecord } from "../core/task-record.js";
import type { TaskStore } from "../core/task-store.js";
import type { TaskImages } from "../images/task-images.js";
import { awaitImageStore } from "./await-image-store.js";
import { generateImages, type EditFile } from "./generate-images.js";
import { keepPartials, type KeepPartialsDeps } from "./keep-partials.js";
import { keepResult, type KeepResultDeps } from "./keep-result.js";
import { assertEditFilesKept, openCredential, readEditFiles } from "./run-inputs.js";
import type { RunContext, RunStep } from "./run-step.js";
import { resumePoll, submitAndPoll, type SubmitPollDeps } from "./submit-poll.js";
import { SKIPPED_IN_ANSWER, warnSkippedOnce } from "./warn-skipped-once.js";

/** How much longer than the task's timeout the channel's silence timer runs. */
const IDLE_MARGIN_MS = 5_000;

/** What the image run step works with. */
export interface ImageRunDeps {
  /** Where the submit-poll strategy keeps a channel's job id (and hands a task over). */
  store: Pick<TaskStore, "transition" | "get">;
  logger: Logger;
  /** Channels with an async API, whose job counters start at 0. */
  asyncChannels: readonly string[];
  /** Where a run reads an edit's input images and writes its result's. */
  images: TaskImages;
  /** Routes a run to its channels: their own keys, or a forward task's gateway with its key. */
  access: ModelAccess;
  /** Forward mode's sealer, to open a task's `sealedCredential`. */
  sealer?: CredentialSealer | undefined;
  /** The runs' own channel client (a generation holds its connection for minutes). */
  client: ChannelClient;
  metrics: Metrics;
  tracer: Tracer;
  /** `imageTasks.timeoutSec`. */
  timeoutSec: number;
  /** Whether the image store works: a run waits for it before it calls a channel. */
  stores: StoreAvailability;
  /** How long a run waits for the image store, in ms. */
  writeRetryMs: number;
  /** Keeping the result and the partial images. */
  keep: KeepResultDeps;
  partials: KeepPartialsDeps;
}

/**
 * The run step of image tasks (generations and edits), in one of two
 * strategies, as the task's first channel says:
 * - **hold**: the channel call, held until it answers (with partial images
 *   kept as they stream);
 * - **submit-poll** (a channel with `async`): the generation submitted as a
 *   job of the channel's, its id kept in the record, then polled (see
 *   `submitAndPoll`); a task whose record names a job already is polled,
 *   never submitted again.
 * Then the result is kept in the image store and the task completed.
 */
export function createImageRunStep(deps: ImageRunDeps): RunStep {
  for (const channel of deps.asyncChannels) {
    for (const outcome of ASYNC_SUBMISSION_OUTCOMES)
      deps.metrics.asyncSubmissions.inc({ channel, outcome }, 0);
    for (const outcome of ASYNC_POLL_OUTCOMES) deps.metrics.asyncPolls.inc({ channel, outcome }, 0);
  }
  const jobs: SubmitPollDeps = { ...deps, keep: deps.keep, partials: deps.partials };
  return async (context) => {
    const { started, signal } = context;
    let candidates: readonly Channel[];
    let result: { images: GeneratedImage[]; usage?: unknown };
    try {
      // A store that cannot be read rejects: the queue runs the task again later.
      candidates = await candidatesOf(deps, started);
      if (started.upstream) {
        const { channel } = started.upstream;
        return await resumePoll(
          jobs,
          context,
          candidates.find((c) => c.name === channel),
          started.upstream,
        );
      }
    } catch (err) {
      if (!(err instanceof TaskFailure)) throw err;
      await context.fail(err);
      return;
    }
    const files = await readEditFiles(deps.images, started);
    try {
      if (candidates.length === 0) {
        throw new TaskFailure("upstream_unavailable", "No channel serves this model any more.");
      }
      assertEditFilesKept(files);
      // A task whose images could not be kept is never sent to a channel.
      await awaitImageStore(deps.stores, signal, deps.writeRetryMs);
      if (candidates[0]?.async) {
        return await submitAndPoll(
          jobs,
          context,
          candidates.filter((c) => c.async),
          files,
        );
      }
      result = await generate(deps, context, candidates, files);
    } catch (err) {
      await context.fail(err);
      return;
    }
    await keepResult(deps.keep, started, result, context.paidSignal, context.end());
  };
}

/** The channels that serve the task: their own keys, or a forward task's gateway with its key. */
async function candidatesOf(deps: ImageRunDeps, started: TaskRecord): Promise<readonly Channel[]> {
  return deps.access.route(started.model, await openCredential(deps.sealer, started));
}

/**
 * The held channel call of a run: its candidates, its body and files, its
 * partial images kept. A lease that lapses meanwhile does not cut it (see
 * `RunContext.paidSignal`): the generation under way is paid for.
 */
async function generate(
  deps: ImageRunDeps,
  { started, paidSignal: signal, telemetry }: RunContext,
  candidates: readonly Channel[],
  files: EditFile[] | undefined,
): Promise<{ images: GeneratedImage[]; usage?: unknown }> {
  const { partialImages } = started;
  return generateImages({
    candidates,
    body: started.request,
    ...(files ? { files } : {}),
    signal,
    // The task's own deadline ends the call; the channel's silence timer only backs it up,
    // so it must never fire first (undici's timers are coarse): a timeout is always `timeout`.
    idleMs: deps.timeoutSec * 1000 + IDLE_MARGIN_MS,
    client: deps.client,
    observer: imageCallObserver(telemetry, started.model, deps),
    onSkipped: warnSkippedOnce(deps.logger, started.id, SKIPPED_IN_ANSWER),
    ...(partialImages
      ? {
          stream: {
            partialImages,
            onPartial: keepPartials(deps.partials, started, signal, telemetry.span),
            onSkipped: warnSkippedOnce(deps.logger, started.id),
          },
        }
      : {}),
  });
}

/** Whether `record` is an image task (a generation or an edit). */
export function isImageTask(record: TaskRecord): boolean {
  return record.kind === undefined || record.kind === "generation" || record.kind === "edit";
}
