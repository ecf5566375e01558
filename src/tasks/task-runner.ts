import type { Logger } from "pino";
import type { ChannelRegistry } from "../channels/channel-registry.js";
import type { Config } from "../config/config-schema.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { createSlowAgent, generateImages } from "./generate-images.js";
import { TaskFailure } from "./task-failure.js";
import type { TaskFinisher } from "./task-finisher.js";
import type { TaskRecord } from "./task-record.js";
import type { TaskStore } from "./task-store.js";

/** The longest delay a Node timer takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Why a running task's upstream call was aborted. */
export type AbortReason = "timeout" | "cancelled" | "shutdown";

/** Dependencies of {@link createTaskRunner}. */
export interface TaskRunnerDeps {
  store: TaskStore;
  registry: ChannelRegistry;
  finisher: TaskFinisher;
  metrics: Metrics;
  logger: Logger;
  limits: Config["imageTasks"];
  now: () => number;
}

/** Runs tasks the queue hands over, one call each. */
export type TaskRunner = ReturnType<typeof createTaskRunner>;

/**
 * Runs one task: `queued -> in_progress`, the channel call bounded by the
 * timeout, cancel and shutdown, then `completed` or `failed`. Never rejects:
 * a failure of its own (the store, say) is logged, and the task is left for
 * the service's reconcile pass to pick up, never silently stuck.
 */
export function createTaskRunner(deps: TaskRunnerDeps) {
  const { store, finisher, metrics, logger, limits, now } = deps;
  const dispatcher = createSlowAgent();
  /** Tasks this process is running (claimed before their first write). */
  const claimed = new Map<string, AbortController>();

  async function settleFailure(started: TaskRecord, signal: AbortSignal, err: unknown) {
    const reason = signal.aborted ? (signal.reason as AbortReason) : undefined;
    if (reason === "cancelled") return; // cancel() already wrote the failure
    if (reason === "shutdown") {
      if (store.persistent) {
        // Handed back, not counted as a run: the next process starts it afresh.
        await store.transition(started.id, "in_progress", {
          status: "queued",
          started_at: undefined,
          attempts: started.attempts - 1,
        });
        return;
      }
      await finisher.fail(started.id, "in_progress", {
        code: "interrupted",
        message: "The service stopped while the task was running.",
        type: "interrupted",
      });
      return;
    }
    let failure: TaskFailure;
    if (reason === "timeout") {
      failure = new TaskFailure(
        "timeout",
        `The image generation did not finish within ${limits.timeoutSec} seconds.`,
        "timeout",
      );
    } else if (err instanceof TaskFailure) {
      failure = err;
    } else {
      logger.error({ err, taskId: started.id }, "task failed unexpectedly");
      failure = new TaskFailure("upstream_error", "The image generation failed unexpectedly.");
    }
    await finisher.fail(started.id, "in_progress", failure.toTaskError());
  }

  async function generate(started: TaskRecord, controller: AbortController) {
    const { id } = started;
    try {
      const candidates = deps.registry.candidates(started.model);
      if (candidates.length === 0) {
        throw new TaskFailure("upstream_unavailable", "No channel serves this model any more.");
      }
      const result = await generateImages({
        candidates,
        body: started.request,
        signal: controller.signal,
        metrics,
        logger,
        dispatcher,
      });
      await Promise.all(
        result.images.map((image, index) =>
          store.putImage(id, index, image.bytes, finisher.imageTtlMs),
        ),
      );
      const completed = await finisher.complete(id, result);
      if (!completed) await store.deleteImages(id, result.images.length); // cancelled meanwhile
    } catch (err) {
      await settleFailure(started, controller.signal, err);
    }
  }

  return {
    async run(id: string): Promise<void> {
      if (claimed.has(id)) return;
      const controller = new AbortController();
      claimed.set(id, controller);
      let timer: NodeJS.Timeout | undefined;
      let started: TaskRecord | undefined;
      try {
        const queued = await store.get(id);
        if (!queued || queued.status !== "queued") return;
        const startedAtMs = now();
        started = await store.transition(id, "queued", {
          status: "in_progress",
          started_at: Math.floor(startedAtMs / 1000),
          attempts: queued.attempts + 1,
        });
        if (!started) return;
        metrics.taskQueueWait.observe(Math.max(0, startedAtMs / 1000 - queued.created));
        metrics.tasksInProgress.inc();
        // Node fires a timer over 2^31-1 ms (24.8 days) at once, so a longer timeout is capped.
        timer = setTimeout(
          () => controller.abort("timeout" satisfies AbortReason),
          Math.min(limits.timeoutSec * 1000, MAX_TIMER_MS),
        );
        await generate(started, controller);
      } catch (err) {
        logger.error({ err, taskId: id }, "task run failed; the reconcile pass will pick it up");
      } finally {
        clearTimeout(timer);
        claimed.delete(id);
        if (started) metrics.tasksInProgress.dec();
      }
    },

    /** Aborts a task this process runs; false when it runs none by that id. */
    abort(id: string, reason: AbortReason): boolean {
      const controller = claimed.get(id);
      controller?.abort(reason);
      return controller !== undefined;
    },

    /** Whether this process is running the task now. */
    isRunning: (id: string) => claimed.has(id),

    /** Aborts every running task with `shutdown` (each settles as its store allows). */
    abortAll(): void {
      for (const controller of claimed.values()) controller.abort("shutdown" satisfies AbortReason);
    },

    close: () => dispatcher.close(),
  };
}
