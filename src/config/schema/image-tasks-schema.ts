import { z } from "zod";
import { fromText, positiveInt } from "./field-types.js";

/** Limits of the asynchronous image-task API. */
export const imageTasksSchema = z
  .object({
    timeoutSec: positiveInt("seconds")
      .default(600)
      .meta({
        description:
          "Seconds one generation may run, from `started_at`; past it the channel call is " +
          "aborted and the task fails with code `timeout`. `IMAGE_ASYNC_TIMEOUT_SEC` overrides it.",
      }),
    maxConcurrent: positiveInt("tasks")
      .default(2)
      .meta({
        description:
          "Tasks in progress at once, across every replica on one Redis; the rest wait in " +
          "order. `IMAGE_ASYNC_MAX_CONCURRENT` overrides it.",
      }),
    maxQueued: positiveInt("tasks").default(1000).meta({
      description:
        "Waiting tasks beyond which submissions get 429 `queue_full` (with `Retry-After`).",
    }),
    retentionSec: positiveInt("seconds")
      .default(86400)
      .meta({
        description:
          "Seconds a finished task and its images are kept; then the task answers 404 and its " +
          "images are deleted.",
      }),
    pollIntervalSec: positiveInt("seconds")
      .default(2)
      .meta({ description: "`Retry-After`, in seconds, sent while a task is unfinished." }),
    maxAttempts: positiveInt("attempts")
      .default(2)
      .meta({
        description:
          "Runs a task may start. A task still in progress when its process died is run again " +
          "until it has started this many times, then fails `interrupted`.",
      }),
    maxQueuedPerKey: positiveInt("tasks")
      .optional()
      .meta({
        description:
          "Tasks one key may have waiting at once, so that one key cannot fill the queue for " +
          "everyone (429 `queue_full` beyond it). Default: half of `maxQueued`, at most 100 " +
          "(at least 1). A group may set its own (`groups.<name>.imageTasks`).",
      }),
    maxRetainedPerKey: positiveInt("tasks")
      .optional()
      .meta({
        description:
          "Tasks one key may hold in the store at once: unfinished ones and finished ones until " +
          "they expire (`retentionSec`), so submitting and cancelling in a loop cannot grow the " +
          "store (429 `too_many_tasks` beyond it). Default: ten times the key's waiting share, " +
          "at most 1000 (and never below that share). A group may set its own.",
      }),
    leaseSec: positiveInt("seconds")
      .default(30)
      .meta({
        description:
          "Redis only: seconds a replica holds a running task's lease without renewing it " +
          "(renewed every 1/12 to 1/6 of it, so a live replica keeps its tasks through an " +
          "event-loop stall of up to 5/6 of it). The tasks of a replica that dies run again " +
          "elsewhere (a channel's async job: is polled on) within about three times this, " +
          "plus `store.commandTimeoutSec` + 3 s: a store outage longer than the lease lets a " +
          "live run's lease lapse, and that run is given the time to say it goes on (every " +
          "5 s, with a mark in Redis that lasts 15 s); the rerun waits for it while it does.",
      }),
    eventsKeepAliveSec: fromText(
      z.number({ error: "must be a number (seconds)" }).positive("must be > 0").max(300),
    )
      .default(15)
      .meta({
        description:
          "Seconds between the comment lines that keep an idle task event stream open through " +
          "proxies and CDNs (Cloudflare cuts a silent connection after 100 s).",
      }),
  })
  .strict()
  .prefault({})
  .meta({ description: "Limits of the asynchronous image-task API." });
