import { z } from "zod";
import { fromText, positiveInt } from "./field-types.js";

/** Limits of the asynchronous image-task API. */
export const imageTasksSchema = z
  .object({
    /** Seconds one generation may run, from `started_at`. Default 600; `IMAGE_ASYNC_TIMEOUT_SEC`. */
    timeoutSec: positiveInt("seconds").default(600),
    /** Tasks in progress at once. Default 2; `IMAGE_ASYNC_MAX_CONCURRENT`. */
    maxConcurrent: positiveInt("tasks").default(2),
    /** Queued tasks beyond which submissions get 429 `queue_full`. Default 1000. */
    maxQueued: positiveInt("tasks").default(1000),
    /** Seconds a finished task and its images are kept. Default 86400. */
    retentionSec: positiveInt("seconds").default(86400),
    /** `Retry-After` sent while a task is unfinished, in seconds. Default 2. */
    pollIntervalSec: positiveInt("seconds").default(2),
    /**
     * Runs a task may start. A task still in progress when its process died is
     * run again until it has started this many times, then fails `interrupted`.
     * Default 2.
     */
    maxAttempts: positiveInt("attempts").default(2),
    /**
     * Tasks one key may have waiting at once, so that one key cannot fill the
     * queue for everyone (429 `queue_full` beyond it). Default half of
     * `maxQueued`, at most 100 (at least 1); a group may set its own
     * (`groups.<name>.imageTasks`).
     */
    maxQueuedPerKey: positiveInt("tasks").optional(),
    /**
     * Tasks one key may hold in the store at once: unfinished ones and finished
     * ones until they expire (`retentionSec`). Bounds what one key can make the
     * store keep, submitting and cancelling included (429 `too_many_tasks`
     * beyond it). Default ten times the key's waiting share, at most 1000 (and
     * never below that share); a group may set its own.
     */
    maxRetainedPerKey: positiveInt("tasks").optional(),
    /**
     * Redis only: seconds a replica holds a running task's lease without
     * renewing it (renewed every half of it). A replica that dies has its
     * tasks picked up by the others within about three times this. Default 30.
     */
    leaseSec: positiveInt("seconds").default(30),
    /**
     * Seconds between the comment lines that keep an idle task event stream
     * open through proxies and CDNs (Cloudflare cuts a silent connection
     * after 100 s). Default 15.
     */
    eventsKeepAliveSec: fromText(
      z.number({ error: "must be a number (seconds)" }).positive("must be > 0").max(300),
    ).default(15),
  })
  .strict()
  .prefault({});
