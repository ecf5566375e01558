import { ApiError, isAbort, type Api } from "./api.js";
import { readEventStream, type SseEvent } from "./sse.js";
import { isFinished, type Task, type TaskImage } from "./task-types.js";

/** What a watcher knows of a task: its latest state, and the newest partial image. */
export interface WatchState {
  task: Task;
  /** The `id:` of the last event seen, to resume after. */
  lastEventId?: string;
  /** The newest partial image of the current run, while the task runs. */
  partial?: TaskImage & { index: number };
}

/** The events a task's stream sends; each `data:` is the task. */
const TASK_EVENTS = new Set([
  "image.task.queued",
  "image.task.in_progress",
  "image.task.partial_image",
  "image.task.completed",
  "image.task.failed",
]);

/**
 * The state after one event. Only a partial image's event shows a partial
 * image (the one its `partial_image_index` names): a new run starts without
 * any, and a finished task shows its results instead.
 */
export function applyEvent(state: WatchState, event: SseEvent): WatchState {
  if (!TASK_EVENTS.has(event.event)) return state;
  const task = JSON.parse(event.data) as Task;
  if (task.id !== state.task.id) return state;
  const next: WatchState = { task, ...(event.id === undefined ? {} : { lastEventId: event.id }) };
  if (event.event === "image.task.partial_image") {
    const index = task.partial_image_index;
    const partial =
      task.partial_images?.find((image) => image.index === index) ?? task.partial_images?.at(-1);
    if (partial) next.partial = partial;
  }
  return next;
}

export interface WatchOptions {
  api: Api;
  /** The task as known when the watch starts (e.g. a submission's answer). */
  task: Task;
  onChange(state: WatchState): void;
  signal: AbortSignal;
  /** Waits between reconnections after a stream that broke off (the last repeats). */
  retryDelaysMs?: readonly number[];
  /** Attempts in a row that got no event before giving up. Default 5. */
  maxAttempts?: number;
}

/**
 * Follows a task over its event stream until it finishes: each event goes to
 * `onChange` as it arrives. A stream that ends early or breaks (a restart, a
 * proxy's timeout) is opened again with `Last-Event-ID`, so nothing is seen
 * twice or missed. Resolves with the final state; rejects with the API's
 * refusal (the task expired, the key was revoked), or when the service stays
 * out of reach, or with the abort.
 */
export async function watchTask(options: WatchOptions): Promise<WatchState> {
  const { api, signal } = options;
  const delays = options.retryDelaysMs ?? [500, 1000, 2000, 4000];
  const maxAttempts = options.maxAttempts ?? 5;
  let state: WatchState = { task: options.task };
  let failures = 0;
  while (!isFinished(state.task.status)) {
    let heard = false;
    try {
      const response = await api.events(state.task.id, state.lastEventId, signal);
      if (!response.body) throw new ApiError(0, "network_error", "The event stream has no body.");
      await readEventStream(response.body.getReader(), (event) => {
        const next = applyEvent(state, event);
        if (next === state) return;
        heard = true;
        state = next;
        options.onChange(state);
      });
    } catch (err) {
      if (isAbort(err) || signal.aborted) throw err;
      // The API refused (404: the task expired; 401: the key): trying again will not help.
      if (err instanceof ApiError && err.status !== 0 && err.status < 500) throw err;
    }
    if (isFinished(state.task.status)) break;
    failures = heard ? 0 : failures + 1;
    if (failures >= maxAttempts) {
      throw new ApiError(0, "network_error", "Lost the task's event stream; try again later.");
    }
    await sleep(delays[Math.min(failures, delays.length - 1)] ?? 1000, signal);
  }
  return state;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
