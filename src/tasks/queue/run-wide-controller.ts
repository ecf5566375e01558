import { setMaxListeners } from "node:events";

/**
 * A controller whose signal every run of a queue listens to (its drain, the end of a stop's
 * grace): one listener a running task, up to `imageTasks.maxConcurrent` at once, each removed
 * when its run ends. Past ten listeners on one signal Node prints a
 * MaxListenersExceededWarning ("possible memory leak") on stderr, which here would only mean
 * more than ten runs at once: this signal takes any number.
 */
export function runWideController(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}
