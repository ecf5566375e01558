import type { Logger } from "pino";

/**
 * A run's warning that its channel's stream held what was skipped (an event that is no JSON
 * object, a draft that is no image), once per run: the task or response completes, and an
 * operator still learns that the channel sends junk. Nothing of the event is logged (it may
 * hold anything, the channel's key included).
 */
export function warnSkippedOnce(logger: Logger, taskId: string): (what: string) => void {
  let warned = false;
  return (what) => {
    if (warned) return;
    warned = true;
    logger.warn({ taskId, skipped: what }, "skipped what the channel's event stream held");
  };
}
