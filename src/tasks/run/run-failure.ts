import type { Logger } from "pino";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { LeaseEnd } from "../core/task-queue.js";
import type { TaskStore } from "../core/task-store.js";
import { TaskFailure } from "../core/task-failure.js";
import type { RunEnd, TaskFinisher } from "../service/task-finisher.js";
import type { TaskRecord } from "../core/task-record.js";
import { taskLine } from "../service/task-line.js";
import { logFields } from "../../logging/log-fields.js";

/** Why a run's upstream call was aborted: its lease ended, or its own timeout. */
export type AbortReason = LeaseEnd | "timeout";

/** The `error` of a task whose run ended with its process. */
export const interrupted = (message: string) =>
  ({ code: "interrupted", message, type: "interrupted" }) as const;

/** What {@link settleRunFailure} writes with. */
export interface RunFailureDeps {
  store: TaskStore;
  finisher: TaskFinisher;
  logger: Logger;
  /** Counts a generation cut by the end of the grace (`task_reruns_total{reason="grace"}`). */
  metrics?: Pick<Metrics, "taskReruns">;
  timeoutSec: number;
}

/**
 * Ends a run whose generation did not succeed, as the abort reason says: a
 * cancel or a lost lease wrote (or will write) the end elsewhere; a hand-back
 * queues the task again without counting the run; a shutdown or a timeout
 * fails it; any other error fails it with its own code (an unexpected one is
 * logged and shown as `upstream_error`, never with its message). A failure
 * met once the run's deadline has passed (a timer of the channel's that
 * fired with the deadline's) is the task's timeout, whichever fired first.
 */
export async function settleRunFailure(
  deps: RunFailureDeps,
  started: TaskRecord,
  signal: AbortSignal,
  err: unknown,
  end: RunEnd = {},
  pastDeadline = false,
): Promise<void> {
  const { store, finisher, logger } = deps;
  const { id, attempts } = started;
  const reason = signal.aborted
    ? (signal.reason as AbortReason)
    : pastDeadline
      ? "timeout"
      : undefined;
  switch (reason) {
    case "cancelled": // the cancel wrote the failure already
      end.span?.addEvent("image.task.cancelled");
      end.span?.setError("cancelled");
      return;
    case "lost": // another run holds the task now
      return;
    case "handback": {
      // Not counted as a run: the next one starts it afresh, and makes its generation again.
      const back = await store.transition(
        id,
        "in_progress",
        { status: "queued", started_at: undefined, startedMs: undefined, attempts: attempts - 1 },
        { attempts },
      );
      if (back) {
        deps.metrics?.taskReruns.inc({ reason: "grace" });
        logFields(
          logger,
          "info",
          { ...taskLine(back), attempt: attempts, reason: "grace" },
          "task.rerun",
        );
      }
      return;
    }
    case "shutdown":
      await finisher.fail(
        started,
        "in_progress",
        interrupted("The service stopped while the task was running."),
        { attempts, end },
      );
      return;
    case "timeout":
      await finisher.fail(
        started,
        "in_progress",
        new TaskFailure(
          "timeout",
          `${whatRuns(started)} did not finish within ${deps.timeoutSec} seconds.`,
          "timeout",
        ),
        { attempts, end },
      );
      return;
  }
  let failure: TaskFailure;
  if (err instanceof TaskFailure) {
    failure = err;
  } else {
    logger.error({ err, taskId: id }, "task failed unexpectedly");
    failure = new TaskFailure("upstream_error", `${whatRuns(started)} failed unexpectedly.`);
  }
  // The failure itself, not its error alone: a channel's answer keeps its status with the task.
  await finisher.fail(started, "in_progress", failure, { attempts, end });
}

/** What a failure's message names as having run: a background response, or an image generation. */
function whatRuns(record: TaskRecord): string {
  return record.kind === "response" ? "The response" : "The image generation";
}
