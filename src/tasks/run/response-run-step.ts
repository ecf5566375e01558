import type { Logger } from "pino";
import type { CredentialSealer } from "../../auth/credential-sealer.js";
import type { Channel } from "../../channels/channel.js";
import type { ChannelAnswer } from "../../channels/channel-answer.js";
import type { ChannelClient } from "../../channels/channel-client.js";
import { ChannelError } from "../../channels/channel-error.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import { countTokens } from "../../metrics/token-counts.js";
import { keyLabelOf } from "../../auth/principal.js";
import type { ModelAccess } from "../../models/model-access.js";
import { createCallObserver } from "../../observability/create-call-observer.js";
import type { Tracer } from "../../tracing/tracer.js";
import type { ResponseEventLog, ResponseState } from "../core/response-state.js";
import type { StoreAvailability } from "../core/store-availability.js";
import { TaskFailure } from "../core/task-failure.js";
import type { TaskRecord } from "../core/task-record.js";
import type { TaskStore } from "../core/task-store.js";
import type { TaskImages } from "../images/task-images.js";
import type { TaskFinisher } from "../service/task-finisher.js";
import { awaitImageStore } from "./await-image-store.js";
import { ResponseImages, RunLost } from "./keep-response-images.js";
import { readResponseEvents, responseRefusal } from "./read-response-stream.js";
import { keptObject } from "../responses/response-object.js";
import { ResponseRun } from "./response-run.js";
import { interrupted } from "./run-failure.js";
import { openCredential } from "./run-inputs.js";
import type { RunContext, RunStep } from "./run-step.js";
import { endingSignal } from "./run-watch.js";
import { warnSkippedOnce } from "./warn-skipped-once.js";

/** How much longer than the task's timeout the channel's silence timer runs. */
const IDLE_MARGIN_MS = 5_000;
/** How long a finished response's events stay readable (a stream resumed, `starting_after`). */
export const FINISHED_EVENTS_KEEP_MS = 10 * 60 * 1000;

/** What the response run step works with. */
export interface ResponseRunDeps {
  store: Pick<TaskStore, "transition">;
  images: Pick<TaskImages, "putResults" | "deleteResults">;
  /** The stream events of background responses. */
  log: ResponseEventLog;
  access: ModelAccess;
  sealer?: CredentialSealer | undefined;
  client: ChannelClient;
  finisher: TaskFinisher;
  metrics: Metrics;
  tracer: Tracer;
  logger: Logger;
  /** `imageTasks.timeoutSec`. */
  timeoutSec: number;
  /** `timeoutSec + retentionSec`: the latest a response that starts now can expire. */
  runLimitSec: number;
  stores: StoreAvailability;
  writeRetryMs: number;
}

/**
 * The run step of background responses (`kind: "response"`): the request
 * goes to a channel as a normal Responses call, streamed (`stream: true`, no
 * `background`), so a CDN in front of the channel sees bytes all along; its
 * events are logged for every replica's streams, its images kept in the image
 * store, and its end written to the task (completed, incomplete, or failed).
 * A response is sent to a channel once: a run after one that may have sent
 * it (its replica died) fails `interrupted` instead of sending it again, and
 * a run handed back after sending fails the same way.
 */
export function createResponseRunStep(deps: ResponseRunDeps): RunStep {
  return async (context) => {
    const { started } = context;
    if (started.attempts > 1) {
      await deps.finisher.fail(started, "in_progress", notSentAgain(), {
        attempts: started.attempts,
        end: context.end(),
      });
      return;
    }
    const sent = { value: false };
    let outcome: Outcome;
    try {
      outcome = await runResponse(deps, context, sent);
    } catch (err) {
      await settle(deps, context, err, sent.value);
      return;
    }
    await finish(deps, context, outcome);
  };
}

/** A run that reached its final event. */
interface Outcome {
  run: ResponseRun;
  images: ResponseImages;
  answer: ChannelAnswer;
}

/** The channel call and its events, up to the final one. */
async function runResponse(
  deps: ResponseRunDeps,
  context: RunContext,
  sent: { value: boolean },
): Promise<Outcome> {
  // Once sent, the response is paid for: a lapsed lease alone does not cut it (see `paidSignal`).
  const { started, signal, paidSignal } = context;
  const images = new ResponseImages(deps, started, paidSignal);
  const run = new ResponseRun(deps.log, deps.logger, started, images);
  await run.begin();
  // A response that may make images is sent only when its images can be kept.
  if (asksForImages(started.request)) {
    await awaitImageStore(deps.stores, signal, deps.writeRetryMs);
  }
  const candidates = candidatesOf(deps, started, await openCredential(deps.sealer, started));
  sent.value = true;
  const answer = await call(deps, context, candidates);
  if (answer.status >= 400) throw await responseRefusal(answer, paidSignal);
  images.setLimit(answer.channel.maxImageBytes);
  const skipped = warnSkippedOnce(deps.logger, started.id);
  for await (const event of readResponseEvents(answer, paidSignal, skipped)) {
    await run.take(event);
    if (!run.final) continue;
    // Counted as soon as it is read: the try's span ends with its answer.
    countUsage(deps, started, answer, run.final);
    // The end came: what the channel sends after it neither counts nor is waited for (junk
    // there must not fail a finished response, nor a stream held open keep it running).
    answer.discard();
    break;
  }
  if (!run.final) {
    if (run.streamError) {
      throw new TaskFailure(run.streamError.code, run.streamError.message, "upstream_error");
    }
    throw new TaskFailure(
      "invalid_response",
      "The upstream channel's stream ended before the response did.",
      "upstream_error",
    );
  }
  return { run, images, answer };
}

/** The Responses call: the request as the client sent it, streamed, not in the background. */
async function call(
  deps: ResponseRunDeps,
  { started, paidSignal: signal, telemetry }: RunContext,
  candidates: Channel[],
): Promise<ChannelAnswer> {
  const body: Record<string, unknown> = { ...started.request, stream: true };
  delete body.background;
  try {
    return await deps.client.send(candidates, {
      route: "response_tasks",
      method: "POST",
      path: "/responses",
      headers: { "content-type": "application/json" },
      body: Buffer.from(JSON.stringify(body)),
      // The task's own deadline ends the call; the channel's silence timer only backs it up.
      timeout: { idleMs: deps.timeoutSec * 1000 + IDLE_MARGIN_MS },
      signal,
      observer: createCallObserver({
        report: telemetry.report,
        operation: "chat",
        model: started.model,
        // The model passed the submission's checks: one a channel serves, a bounded label.
        modelLabel: started.model,
        parent: telemetry.span,
        tracer: deps.tracer,
        metrics: deps.metrics,
      }),
    });
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (err instanceof ChannelError) throw new TaskFailure(err.code, err.message, "upstream_error");
    throw err;
  }
}

/** Channels that may run it: those serving its model (as its key may call them), or the pinned one. */
function candidatesOf(
  deps: ResponseRunDeps,
  started: TaskRecord,
  credential: string | undefined,
): Channel[] {
  const pinned = started.response?.pinned;
  const candidates = deps.access
    .route(started.model, credential)
    .filter((channel) => pinned === undefined || channel.name === pinned);
  if (candidates.length === 0) {
    throw new TaskFailure("upstream_unavailable", "No channel serves this model any more.");
  }
  return candidates;
}

/** Whether the request names the `image_generation` tool. */
function asksForImages(request: Record<string, unknown>): boolean {
  const { tools } = request;
  return (
    Array.isArray(tools) &&
    tools.some((tool) => (tool as { type?: unknown } | null)?.type === "image_generation")
  );
}

/** Writes the response's end as its final event says; its events are kept a while more. */
async function finish(
  deps: ResponseRunDeps,
  context: RunContext,
  { run, images, answer }: Outcome,
): Promise<void> {
  const { started } = context;
  const final = run.final as Record<string, unknown>;
  const response: ResponseState = {
    ...(started.response as ResponseState),
    channel: answer.channel.name,
    final: keptObject(started, final),
    events: run.events,
  };
  if (run.upstreamId !== undefined) response.upstreamId = run.upstreamId;
  const end = context.end();
  const done =
    final.status === "failed"
      ? await deps.finisher.fail(started, "in_progress", failureOf(final), {
          attempts: started.attempts,
          end,
          more: { response },
        })
      : await deps.finisher.complete(
          started,
          started.attempts,
          // The usage is the final response's own, not kept twice.
          { images: images.results },
          { end, more: { response } },
        );
  if (done) {
    await deps.log.expire(started.id, FINISHED_EVENTS_KEEP_MS).catch(() => undefined);
  }
}

/** A failed final response's error as the task's. */
function failureOf(final: Record<string, unknown>) {
  const error = final.error as { code?: unknown; message?: unknown } | null | undefined;
  return {
    code: typeof error?.code === "string" ? error.code : "server_error",
    message: typeof error?.message === "string" ? error.message : "The response failed.",
    type: "upstream_error",
  };
}

/** The final response's usage, counted in the token metrics and the try's span. */
function countUsage(
  deps: ResponseRunDeps,
  started: TaskRecord,
  answer: ChannelAnswer,
  final: Record<string, unknown>,
): void {
  const { usage } = final;
  const { input_tokens: input, output_tokens: output } = (usage ?? {}) as Record<string, unknown>;
  if (typeof input !== "number" || typeof output !== "number") return;
  const model = typeof final.model === "string" ? final.model : undefined;
  answer.observer?.usage?.({ input, output }, model);
  countTokens(
    deps.metrics,
    {
      channel: answer.channel.name,
      model: started.model,
      group: started.response?.group ?? started.group ?? "other",
      key: keyLabelOf({ subject: started.owner, keyName: started.keyName }),
    },
    { input, output },
  );
}

/**
 * Ends a run that did not reach its final event: a lost lease or a cancel
 * as the runner settles them; a hand-back or a shutdown after the request
 * went out fails it `interrupted` (the channel may have run it: it is not
 * sent again); anything else as the task's failure.
 */
async function settle(
  deps: ResponseRunDeps,
  context: RunContext,
  err: unknown,
  sent: boolean,
): Promise<void> {
  const { started } = context;
  const signal = endingSignal(context);
  if (err instanceof RunLost && !signal.aborted) return;
  const reason = signal.aborted ? signal.reason : undefined;
  if (sent && reason === "handback") {
    await deps.finisher.fail(started, "in_progress", notSentAgain(), {
      attempts: started.attempts,
      end: context.end(),
    });
    return;
  }
  await context.fail(err);
}

function notSentAgain() {
  return interrupted(
    "The service stopped while the response was running; it is not sent to a channel again, " +
      "which may have run it already.",
  );
}
