import { ServiceError } from "../errors/service-error.js";

/** The codes a failed channel call ends with (see the Errors table). */
export type ChannelErrorCode = "upstream_unavailable" | "upstream_timeout" | "invalid_response";

/**
 * A call to a channel that gave no usable answer. It is a {@link ServiceError},
 * so the passthrough hands it to the one error writer as it is; the task
 * runner turns it into a task failure with the same code. Its message is the
 * service's own words, never the channel's text, so it holds no key.
 */
export class ChannelError extends ServiceError {
  declare readonly code: ChannelErrorCode;

  /**
   * @param reason safe to log: an error code (`ECONNREFUSED`, `UND_ERR_SOCKET`), a
   *   status or a word (`too_large`, `cut`), never a message that could echo the request
   * @param channel the name of the channel it happened on, when one was called
   */
  constructor(
    code: ChannelErrorCode,
    message: string,
    readonly reason: string,
    readonly channel?: string,
  ) {
    // A timeout or a broken answer means the channel may have run (and billed) the request;
    // "unavailable" means no channel took it.
    super(code, message, { mayHaveRun: code !== "upstream_unavailable" });
    this.name = "ChannelError";
  }
}

/** No channel took the request: each one was unreachable, or refused it before it was sent. */
export const unreachable = (reason: string, channel?: string) =>
  new ChannelError(
    "upstream_unavailable",
    "No upstream channel could be reached.",
    reason,
    channel,
  );

/** The channel was silent for its timeout before its answer began. */
export const noAnswerInTime = (channel: string) =>
  new ChannelError(
    "upstream_timeout",
    "The upstream channel did not answer in time.",
    "timeout",
    channel,
  );

/** The channel was silent for its timeout in the middle of its answer. */
export const stoppedSending = (channel: string) =>
  new ChannelError(
    "upstream_timeout",
    "The upstream channel stopped sending its answer.",
    "timeout",
    channel,
  );

/** The connection broke after the whole request went out and before any answer. */
export const closedWithoutAnswer = (reason: string, channel: string) =>
  new ChannelError(
    "invalid_response",
    "The upstream channel closed the connection without answering.",
    reason,
    channel,
  );

/** The answer broke off: a reset or a close in the middle of its body. */
export const answerCut = (reason: string, channel: string) =>
  new ChannelError(
    "invalid_response",
    "The upstream channel's answer was cut off.",
    reason,
    channel,
  );

/** The answer (or what was read of it) was larger than its reader's cap. */
export const answerTooLarge = (limit: number, channel: string) =>
  new ChannelError(
    "invalid_response",
    `The upstream channel's answer is larger than ${limit} bytes.`,
    "too_large",
    channel,
  );

/** The answer has a `Content-Encoding` this service cannot decode, or is corrupt in it. */
export const answerUndecodable = (channel: string) =>
  new ChannelError(
    "invalid_response",
    "The upstream channel's answer could not be decoded.",
    "undecodable",
    channel,
  );

/** Redirects are never followed: the prompt (and the key) would go where nobody configured. */
export const redirected = (status: number, channel: string) =>
  new ChannelError(
    "invalid_response",
    `The upstream channel answered a redirect (HTTP ${status}), which is not followed.`,
    `status ${status}`,
    channel,
  );

/** A JSON answer (by its `Content-Type`, or as the caller expects) that does not parse. */
export const answerNotJson = (channel: string) =>
  new ChannelError(
    "invalid_response",
    "The upstream channel's answer is not valid JSON.",
    "not_json",
    channel,
  );
