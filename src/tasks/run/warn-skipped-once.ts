import type { Logger } from "pino";

/** The warning of what a channel's event stream held that was skipped. */
export const SKIPPED_IN_STREAM = "skipped what the channel's event stream held";
/** The warning of an image of several in a channel's answer that could not be had. */
export const SKIPPED_IN_ANSWER = "skipped an image of the channel's answer";

/**
 * A run's warning that its channel's answer held what was skipped (an event that is no JSON
 * object, a draft that is no image, an image of several that could not be had), once per run:
 * the task or response completes, and an operator still learns that the channel sends junk.
 * Nothing of the answer is logged (it may hold anything, the channel's key included).
 * @param message default {@link SKIPPED_IN_STREAM}
 */
export function warnSkippedOnce(
  logger: Logger,
  taskId: string,
  message = SKIPPED_IN_STREAM,
): (what: string) => void {
  let warned = false;
  return (what) => {
    if (warned) return;
    warned = true;
    logger.warn({ taskId, skipped: what }, message);
  };
}
