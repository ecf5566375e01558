import type {
  ImageTaskApiClient,
  ImageTaskEvent,
  ImageTaskSnapshot,
} from "./image-task-api-client.js";

/** How `check_image_task` waits. */
export interface WaitForTaskOptions {
  api: ImageTaskApiClient;
  taskId: string;
  waitSeconds: number;
  /** Shortest pause before asking again when the service answered early (one that does not wait). */
  pollIntervalMs: number;
  /** Longest such pause, however large the server's `Retry-After`. */
  maxPollIntervalMs: number;
  /** How often `onProgress` is called while the service holds the answer. */
  progressIntervalMs: number;
  signal?: AbortSignal;
  /**
   * Called when the wait starts, every `progressIntervalMs` while it lasts,
   * and after each early answer, with the seconds waited so far and the task
   * as last seen (none before the first answer).
   */
  onProgress?: (
    elapsedSeconds: number,
    snapshot: ImageTaskSnapshot | undefined,
  ) => Promise<void> | void;
  /**
   * With it, the wait follows the task's event stream (when the API has
   * one), calling this for each event as it comes: started, each partial
   * image, done. Without it, or when the stream fails, the service holds a
   * plain request instead.
   */
  onEvent?: (event: ImageTaskEvent) => void;
}

/** True once a task will not change any more. */
export function isFinished(status: string): boolean {
  return status === "completed" || status === "failed";
}

/**
 * Waits until the task is finished or `waitSeconds` have passed, then returns the last answer
 * (asked for once more after an event stream, so that it carries what GET shows).
 * The service does the waiting (`GET ...?wait=N`): it answers the moment the task finishes, so
 * one request covers the whole wait and nothing polls. A service that answers early anyway (an
 * older one, or one that restarted) is asked again after a pause, as long as time remains. The
 * wait is capped by the caller (25 s) so the tool call ends well inside the ~60 s after which
 * MCP clients give up; progress notifications keep coming meanwhile.
 */
export async function waitForTask(options: WaitForTaskOptions): Promise<ImageTaskSnapshot> {
  const started = Date.now();
  const deadline = started + options.waitSeconds * 1000;
  const elapsed = () => (Date.now() - started) / 1000;
  let last: ImageTaskSnapshot | undefined;
  const report = () => {
    Promise.resolve(options.onProgress?.(elapsed(), last)).catch(() => undefined);
  };
  report();
  const ticker = options.onProgress ? setInterval(report, options.progressIntervalMs) : undefined;
  try {
    const { api, onEvent } = options;
    if (onEvent && api.watchTask) {
      try {
        await api.watchTask(options.taskId, {
          waitSeconds: options.waitSeconds,
          signal: options.signal,
          onEvent: (event) => {
            last = { task: event.task, retryAfterSeconds: undefined };
            onEvent(event);
          },
        });
      } catch (error) {
        if (options.signal?.aborted) throw error;
        // A service without event streams, or a stream cut short: the plain wait below
        // covers what is left (at once, when the task finished).
      }
    }
    for (;;) {
      const remaining = deadline - Date.now();
      last = await options.api.getTask(options.taskId, options.signal, {
        waitSeconds: Math.max(0, remaining / 1000),
      });
      const left = deadline - Date.now();
      if (isFinished(last.task.status) || left <= 0) return last;
      report();
      const hinted = (last.retryAfterSeconds ?? 0) * 1000;
      const pause = Math.min(
        Math.max(options.pollIntervalMs, Math.min(hinted, options.maxPollIntervalMs)),
        left,
      );
      await sleep(pause, options.signal);
    }
  } finally {
    clearInterval(ticker);
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
