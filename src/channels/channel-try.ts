import type { IncomingHttpHeaders } from "node:http";
import type { Dispatcher } from "undici";
import { ServiceError } from "../errors/service-error.js";
import type { Channel } from "./channel.js";
import { StreamedAnswer, type AnswerSource } from "./channel-answer.js";
import { answerCut, stoppedSending } from "./channel-error.js";
import type { TryStage } from "./failover-policy.js";
import type { KeyScrubber } from "./key-scrubber.js";

/** How one try of a call ended, as far as the failover rule needs to know. */
export type TryOutcome =
  | { kind: "answer"; answer: StreamedAnswer }
  /** No answer: `error` is undici's (network, timeout), the body's own, or the abort reason. */
  | { kind: "failure"; stage: TryStage; error: Error };

/** What a try reports to the call that made it. */
export interface TryEvents {
  /** Once: the answer's head arrived, or the try failed before it. */
  outcome(outcome: TryOutcome): void;
  /** Once, after an answer's body ended, failed or was dropped. */
  settled(): void;
}

/**
 * One try of a call on one channel, as an undici dispatch handler: a small
 * state machine, `connecting -> sending -> sent -> answered -> streaming ->
 * done` (see {@link TryStage}). Its stage when it fails is what the failover
 * rule reads. A buffered body is sent the moment the connection is there; a
 * streamed one only once {@link bodySent} says all of it went out.
 *
 * At the answer's head the connection is paused, and stays so until the
 * caller takes the body: nothing is read before someone wants it.
 */
export class ChannelTry implements Dispatcher.DispatchHandler, AnswerSource {
  stage: TryStage = "connecting";
  private controller: Dispatcher.DispatchController | undefined;
  private answer: StreamedAnswer | undefined;
  private abortReason: Error | undefined;
  private bodyError: Error | undefined;

  constructor(
    private readonly channel: Channel,
    private readonly scrubber: KeyScrubber,
    /** The body is streamed: the request counts as sent only at {@link bodySent}. */
    private readonly streamed: boolean,
    private readonly events: TryEvents,
  ) {}

  /** The streamed body went out whole. */
  bodySent(): void {
    if (this.stage === "sending") this.stage = "sent";
  }

  /** The request's own body failed (a form refused half-way): the try ends with `err`. */
  bodyFailed(err: Error): void {
    this.bodyError ??= err;
  }

  /** Ends the try: an abort of the call, or a reader that gave up on the answer. */
  abort(reason: Error): void {
    if (this.stage === "done") return;
    this.abortReason ??= reason;
    if (this.controller) {
      this.controller.abort(reason);
      return;
    }
    // Still waiting for a connection: undici starts nothing now, and aborts at its first
    // chance (onRequestStart); the call is over for the caller at once.
    const stage = this.stage;
    this.stage = "done";
    this.events.outcome({ kind: "failure", stage, error: reason });
  }

  /** The answer's body: hold the connection. */
  pause(): void {
    this.controller?.pause();
  }

  /** The answer's body: read on. */
  resume(): void {
    this.controller?.resume();
  }

  /** The answer's body ended, failed or was dropped. */
  settled(): void {
    this.events.settled();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortReason) {
      controller.abort(this.abortReason);
      return;
    }
    if (this.stage === "connecting") this.stage = this.streamed ? "sending" : "sent";
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    // 1xx heads are informational; the answer's own comes after.
    if (status < 200 || this.stage === "done") return;
    this.stage = "answered";
    this.controller = controller;
    controller.pause();
    this.answer = new StreamedAnswer(this.channel, status, headers, this.scrubber, this);
    this.events.outcome({ kind: "answer", answer: this.answer });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.stage === "answered") this.stage = "streaming";
    if (!this.answer?.push(chunk)) controller.pause();
  }

  onResponseEnd(): void {
    this.stage = "done";
    this.answer?.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.answer) {
      this.stage = "done";
      this.answer.fail(this.bodyFailure(err));
      return;
    }
    if (this.stage === "done") return;
    const stage = this.stage;
    this.stage = "done";
    this.events.outcome({
      kind: "failure",
      stage,
      error: this.bodyError ?? this.abortReason ?? err,
    });
  }

  /** What a reader is told when the body broke off with undici's `err`. */
  private bodyFailure(err: Error): Error {
    const own = this.abortReason ?? this.bodyError;
    if (own) return own;
    if (err instanceof ServiceError) return err;
    const code = (err as { code?: unknown }).code;
    if (code === "UND_ERR_BODY_TIMEOUT") return stoppedSending(this.channel.name);
    return answerCut(typeof code === "string" ? code : "closed", this.channel.name);
  }
}
