import type { Channel } from "./channel.js";

/**
 * Hears each try of one call to channels: what access lines, task lines and
 * client spans report (which channel, what it answered, how many tries). The
 * channel client calls it; it never changes what the call does.
 */
export interface CallObserver {
  /** A try begins on `channel`. */
  tryStarted(channel: Channel): TryObserver;
}

/** One try, from its start to the end of its answer. */
export interface TryObserver {
  /**
   * Headers this try sends besides the request's own, as a flat name/value
   * list (a `traceparent` naming the try's span), or none.
   */
  readonly headers: readonly string[] | undefined;
  /** The answer's head arrived with `status`. */
  answered(status: number): void;
  /** The try got no answer: `reason` is a code (`ECONNREFUSED`, `timeout`), never a message. */
  failed(reason: string): void;
  /** The answer reported token usage, and the model that answered (when it says). */
  usage?(usage: { input: number; output: number }, responseModel?: string): void;
  /** The try is over: its answer was read, passed on, dropped or broke, or it failed. */
  ended(): void;
}
