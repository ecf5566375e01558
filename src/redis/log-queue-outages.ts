import type { Logger } from "pino";

/**
 * BullMQ's error codes for a job that ended after its lock was gone (-2) or
 * taken by another worker (-6): its run outlived a lapsed lease, and the
 * stalled check hands the job out again.
 */
const LOCK_GONE = new Set<unknown>([-2, -6]);

/** BullMQ's own words (it sets no code) when a running job's lock could not be renewed. */
const RENEWAL_FAILED = /^could not renew lock for job (\S+)/;

/** The job an error of {@link LOCK_GONE} names (`Missing lock for job <id>. <command>`). */
const JOB_ID = /for job (\S+?)\.? /;

/** Jobs remembered as lapsed at most (a run that never ends is forgotten past it). */
const MAX_LAPSED = 10_000;

/**
 * BullMQ reports each failed reconnect as an `error` event (and an unheard
 * one would crash the process): log one line per outage, at most a minute
 * apart (`queue error`). A lease that lapsed is not an outage, and must not
 * hide the next one: one `queue lease lapsed` line (`warn`) per job whose
 * lock could not be renewed (BullMQ says so at every renewal while its run
 * goes on), and one `queue job lock lapsed` (`info`) when that job's run
 * ends without its lock.
 */
export function logQueueOutages(
  emitter: { on(event: "error", listener: (err: Error) => void): unknown },
  logger: Logger,
  component: string,
): void {
  let last = 0;
  const lapsed = new Set<string>();
  emitter.on("error", (err: Error) => {
    const renewal = RENEWAL_FAILED.exec(err.message);
    if (renewal) {
      const jobId = renewal[1] as string;
      if (lapsed.has(jobId)) return;
      if (lapsed.size >= MAX_LAPSED) lapsed.delete(lapsed.values().next().value as string);
      lapsed.add(jobId);
      logger.warn({ err: err.message, component }, "queue lease lapsed");
      return;
    }
    if (LOCK_GONE.has((err as { code?: unknown }).code)) {
      const jobId = JOB_ID.exec(err.message)?.[1];
      if (jobId !== undefined) lapsed.delete(jobId);
      logger.info({ err: err.message, component }, "queue job lock lapsed");
      return;
    }
    if (Date.now() - last < 60_000) return;
    last = Date.now();
    logger.warn({ err: err.message, component }, "queue error");
  });
}
