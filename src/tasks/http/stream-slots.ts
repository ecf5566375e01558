import { ServiceError } from "../../errors/service-error.js";

/** How many event streams may be open (`events.maxStreamsPerKey`, `events.maxStreams`). */
export interface StreamLimits {
  maxStreamsPerKey: number;
  maxStreams: number;
}

/** Why a stream was refused, as metrics label it. */
export type StreamRefusal = "per_key" | "total";

/** Seconds a refused client is told to wait: streams end as their tasks do. */
const RETRY_AFTER_SEC = 10;

/**
 * The event streams open in this process, counted per owner (principal
 * subject) and in all, so that one key cannot hold every stream (each holds a
 * socket, a place in the task feed and, while it writes, an image).
 */
export class StreamSlots {
  private total = 0;
  private readonly perKey = new Map<string, number>();

  constructor(
    private readonly limits: StreamLimits,
    private readonly refused: (reason: StreamRefusal) => void,
  ) {}

  /**
   * Takes a slot for `subject`; resolves nothing, returns its release (safe to
   * call twice).
   * @throws ServiceError `too_many_event_streams` (429, with `Retry-After`)
   */
  take(subject: string): () => void {
    const held = this.perKey.get(subject) ?? 0;
    if (held >= this.limits.maxStreamsPerKey) {
      throw this.refuse(
        "per_key",
        `This key has ${held} event streams open, as many as it may; close one, or poll ` +
          "the task instead.",
      );
    }
    if (this.total >= this.limits.maxStreams) {
      throw this.refuse(
        "total",
        "The service has as many event streams open as it takes; retry shortly, or poll the " +
          "task instead.",
      );
    }
    this.perKey.set(subject, held + 1);
    this.total += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total -= 1;
      const left = (this.perKey.get(subject) ?? 1) - 1;
      if (left <= 0) this.perKey.delete(subject);
      else this.perKey.set(subject, left);
    };
  }

  private refuse(reason: StreamRefusal, message: string): ServiceError {
    this.refused(reason);
    return new ServiceError("too_many_event_streams", message, { retryAfter: RETRY_AFTER_SEC });
  }
}
