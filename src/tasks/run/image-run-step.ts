import type { CredentialSealer } from "../../auth/credential-sealer.js";
import type { ChannelClient } from "../../channels/channel-client.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { ModelAccess } from "../../models/model-access.js";
import { createCallObserver } from "../../observability/create-call-observer.js";
import type { Tracer } from "../../tracing/tracer.js";
import type { GeneratedImage } from "../core/generated-image.js";
import type { StoreAvailability } from "../core/store-availability.js";
import { TaskFailure } from "../core/task-failure.js";
import type { TaskRecord } from "../core/task-record.js";
import type { TaskImages } from "../images/task-images.js";
import { awaitImageStore } from "./await-image-store.js";
import { generateImages, type EditFile } from "./generate-images.js";
import { keepPartials, type KeepPartialsDeps } from "./keep-partials.js";
import { keepResult, type KeepResultDeps } from "./keep-result.js";
import { assertEditFilesKept, openCredential, readEditFiles } from "./run-inputs.js";
import type { RunContext, RunStep } from "./run-step.js";

/** How much longer than the task's timeout the channel's silence timer runs. */
const IDLE_MARGIN_MS = 5_000;

/** What the image run step works with. */
export interface ImageRunDeps {
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
 * The run step of image tasks (generations and edits): the channel call,
 * held until it answers (with partial images kept as they stream), then the
 * result kept in the image store and the task completed.
 */
export function createImageRunStep(deps: ImageRunDeps): RunStep {
  return async (context) => {
    const { started, signal } = context;
    // A store that cannot be read rejects: the queue runs the task again later.
    const files = await readEditFiles(deps.images, started);
    let result: { images: GeneratedImage[]; usage?: unknown };
    try {
      // A task whose images could not be kept is never sent to a channel.
      await awaitImageStore(deps.stores, signal, deps.writeRetryMs);
      result = await generate(deps, context, files);
    } catch (err) {
      await context.fail(err);
      return;
    }
    await keepResult(deps.keep, started, result, signal, context.end());
  };
}

/** The channel call of a run: its candidates, its body and files, its partial images kept. */
async function generate(
  deps: ImageRunDeps,
  { started, signal, telemetry }: RunContext,
  files: EditFile[] | undefined,
): Promise<{ images: GeneratedImage[]; usage?: unknown }> {
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
    idleMs: deps.timeoutSec * 1000 + IDLE_MARGIN_MS,
    client: deps.client,
    observer: createCallObserver({
      report: telemetry.report,
      operation: "image_generation",
      model: started.model,
      // The model passed the task's checks: one a channel serves, a bounded label.
      modelLabel: started.model,
      parent: telemetry.span,
      tracer: deps.tracer,
      metrics: deps.metrics,
    }),
    ...(partialImages
      ? {
          stream: {
            partialImages,
            onPartial: keepPartials(deps.partials, started, signal, telemetry.span),
          },
        }
      : {}),
  });
}

/** Whether `record` is an image task (a generation or an edit). */
export function isImageTask(record: TaskRecord): boolean {
  return record.kind === undefined || record.kind === "generation" || record.kind === "edit";
}
