import type { CallObserver } from "../../channels/call-observer.js";
import {
  createCallObserver,
  type CallObserverOptions,
} from "../../observability/create-call-observer.js";
import type { RunTelemetry } from "./run-step.js";

/**
 * The observer of an image task's channel call, whichever strategy makes it
 * (one held call, or a submission then polls): the run's report and span,
 * the GenAI `image_generation` operation.
 */
export function imageCallObserver(
  telemetry: RunTelemetry,
  model: string,
  deps: Pick<CallObserverOptions, "tracer" | "metrics">,
  /** False for a job's submission (see `CallObserverOptions.timed`). */
  timed = true,
): CallObserver {
  return createCallObserver({
    timed,
    report: telemetry.report,
    operation: "image_generation",
    model,
    // The model passed the task's checks: one a channel serves, a bounded label.
    modelLabel: model,
    parent: telemetry.span,
    tracer: deps.tracer,
    metrics: deps.metrics,
  });
}
