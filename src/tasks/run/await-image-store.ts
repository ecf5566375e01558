import type { StoreAvailability } from "../core/store-availability.js";
import { TaskFailure } from "../core/task-failure.js";

/** How often a waiting run looks again (the image store is re-checked every 2 s while it fails). */
const LOOK_EVERY_MS = 250;

/**
 * Resolves once the image store works (at once when it does), so that a run
 * calls its channel only when its images can be kept. A store that stays
 * unavailable for `maxMs` fails the task `storage_unavailable` before any
 * channel is called; the run's end (`signal`) rejects with its reason.
 */
export async function awaitImageStore(
  stores: Pick<StoreAvailability, "imagesAvailable">,
  signal: AbortSignal,
  maxMs: number,
): Promise<void> {
  const until = Date.now() + maxMs;
  while (!stores.imagesAvailable()) {
    if (signal.aborted) throw signal.reason;
    if (Date.now() >= until) {
      throw new TaskFailure(
        "storage_unavailable",
        `The image store was unavailable for ${Math.round(maxMs / 1000)} seconds, so the task was not sent to a channel.`,
        "server_error",
      );
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, LOOK_EVERY_MS);
      function done() {
        signal.removeEventListener("abort", done);
        clearTimeout(timer);
        resolve();
      }
      signal.addEventListener("abort", done, { once: true });
    });
  }
}
