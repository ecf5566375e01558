import type { ImageTaskApiClient, ImageTaskSnapshot } from "./image-task-api-client.js";

/** How `check_image_task` polls while it waits. */
export interface WaitForTaskOptions {
  api: ImageTaskApiClient;
  taskId: string;
  waitSeconds: number;
  /** Shortest pause between two polls. */
  pollIntervalMs: number;
  /** Longest pause, however large the server's `Retry-After`. */
  maxPollIntervalMs: number;
  signal?: AbortSignal;
  /** Called before each pause with the seconds waited so far. */
  onProgress?: (elapsedSeconds: number, snapshot: ImageTaskSnapshot) => Promise<void> | void;
}

/** True once a task will not change any more. */
export function isFinished(status: string): boolean {
  return status === "completed" || status === "failed";
}

/**
 * Polls until the task is finished or `waitSeconds` have passed, then returns the last answer.
 * The wait is capped by the caller (25 s) so the tool call ends well inside the ~60 s after which
 * MCP clients give up; `Retry-After` is honoured up to `maxPollIntervalMs` so a finished task is
 * noticed promptly.
 */
export async function waitForTask(options: WaitForTaskOptions): Promise<ImageTaskSnapshot> {
  const started = Date.now();
  const deadline = started + options.waitSeconds * 1000;
  for (;;) {
    const snapshot = await options.api.getTask(options.taskId, options.signal);
    const remaining = deadline - Date.now();
    if (isFinished(snapshot.task.status) || remaining <= 0) return snapshot;
    await options.onProgress?.((Date.now() - started) / 1000, snapshot);
    const hinted = (snapshot.retryAfterSeconds ?? 0) * 1000;
    const pause = Math.min(
      Math.max(options.pollIntervalMs, Math.min(hinted, options.maxPollIntervalMs)),
      remaining,
    );
    await sleep(pause, options.signal);
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
