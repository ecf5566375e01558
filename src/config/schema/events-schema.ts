import { z } from "zod";
import { positiveInt } from "./field-types.js";

/** Task event streams (`GET /v1/images/tasks/{id}/events`, submissions that ask for a stream). */
export const eventsSchema = z
  .object({
    maxStreamsPerKey: positiveInt("streams")
      .default(100)
      .meta({
        description:
          "Event streams one key (or JWT subject, or forward key) may hold open at once in this " +
          "process; past it 429 `too_many_event_streams` with `Retry-After`.",
      }),
    maxStreams: positiveInt("streams")
      .default(10_000)
      .meta({
        description:
          "Event streams open at once in this process, all keys together; past it 429 " +
          "`too_many_event_streams` with `Retry-After`.",
      }),
    slowReaderSec: positiveInt("seconds")
      .default(30)
      .meta({
        description:
          "Seconds an event stream may wait on a client that reads nothing (its socket full, an " +
          "event half-written); past it the stream is cut, freeing its memory and any image file " +
          "it holds open. The client reconnects with `Last-Event-ID` to resume.",
      }),
  })
  .strict()
  .prefault({})
  .meta({
    description:
      "Task event streams: how many may be open, and how long one may wait on a client that " +
      "does not read.",
  });
