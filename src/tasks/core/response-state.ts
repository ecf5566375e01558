/*
 * A background response (`POST /v1/responses` with `background: true`) is a
 * task of kind `response`: the same record, queue, limits and retention as an
 * image task, with this state of its own, and its stream's events kept apart
 * in a {@link ResponseEventLog}.
 */

/** What a task record keeps of a background response besides the request. */
export interface ResponseState {
  /** The group of the key that made it: the label of its token metrics. */
  group: string;
  /** `previous_response_id` as the client sent it (the channel is sent its own id for it). */
  previous?: string;
  /** The one channel it may run on (the one holding its previous response); absent: any. */
  pinned?: string;
  /** The channel that ran it, once one answered. */
  channel?: string;
  /** That channel's own id for it: what a later `previous_response_id` naming it is sent as. */
  upstreamId?: string;
  /**
   * The Response object as it ended (completed, incomplete, or failed as the
   * channel told it), its images as {@link ImageRef}s, never their bytes.
   */
  final?: Record<string, unknown>;
  /** How many events its stream logged by its end (sequence numbers 0 to `events - 1`). */
  events?: number;
}

/** The Responses API's statuses of a response. */
export type ResponseStatus =
  "queued" | "in_progress" | "completed" | "failed" | "cancelled" | "incomplete";

/**
 * The status a background response shows: the task's, with a cancel (a
 * failure coded `cancelled`) as `cancelled`, and an end the channel called
 * `incomplete` (a completed task) as such.
 */
export function responseStatusOf(record: {
  status: "queued" | "in_progress" | "completed" | "failed";
  error?: { code: string };
  response?: ResponseState;
}): ResponseStatus {
  switch (record.status) {
    case "queued":
    case "in_progress":
      return record.status;
    case "completed":
      return record.response?.final?.status === "incomplete" ? "incomplete" : "completed";
    case "failed":
      return record.error?.code === "cancelled" ? "cancelled" : "failed";
  }
}

/**
 * An image of a response as the service keeps it where the channel sent its
 * base64 (an `image_generation_call`'s `result`, a partial image's
 * `partial_image_b64`): the key of its bytes in the image store.
 */
export interface ImageRef {
  $image: { key: string; bytes: number };
}

/** Whether `value` is an {@link ImageRef}. */
export function isImageRef(value: unknown): value is ImageRef {
  const ref = (value as { $image?: { key?: unknown; bytes?: unknown } } | null)?.$image;
  return typeof ref?.key === "string" && typeof ref.bytes === "number";
}

/** The events that end a response's stream. */
export const FINAL_RESPONSE_EVENTS: ReadonlySet<string> = new Set([
  "response.completed",
  "response.failed",
  "response.incomplete",
]);

/** One logged event of a response's stream. */
export interface LoggedEvent {
  /** Its `sequence_number`: its place in the log, from 0. */
  seq: number;
  /** Its `type` (`response.output_text.delta`). */
  type: string;
  /** Its JSON, without `sequence_number`; images as {@link ImageRef}s. */
  json: string;
}

/**
 * The events of background responses' streams, where every replica reads
 * them, so a stream cut anywhere resumes anywhere (`starting_after`): on
 * Redis a capped list per response with a TTL; on the embedded stores, in the
 * process, bounded. Events carry no image bytes (only {@link ImageRef}s).
 */
export interface ResponseEventLog {
  /**
   * Appends events in order (`type` and JSON each); resolves the sequence
   * number of the first, or undefined when the log of this response is full
   * (a `final` event is taken even then).
   */
  append(
    id: string,
    events: ReadonlyArray<{ type: string; json: string }>,
    options?: { final?: boolean },
  ): Promise<number | undefined>;
  /** Up to `limit` events after sequence number `after` (-1: from the first). */
  read(id: string, after: number, limit: number): Promise<LoggedEvent[]>;
  /** Keeps the log `ttlMs` more from now, then drops it (its response ended). */
  expire(id: string, ttlMs: number): Promise<void>;
  delete(id: string): Promise<void>;
  /** Calls `listener` when this process appends to `id`'s log; returns the unsubscribe. */
  onAppend(id: string, listener: () => void): () => void;
  /**
   * How often a follower reads again when nothing woke it: appends from other
   * processes are seen this late at most (milliseconds).
   */
  readonly pollMs: number;
}
