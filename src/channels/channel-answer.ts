import type { IncomingHttpHeaders } from "node:http";
import type { Transform } from "node:stream";
import type { Channel } from "./channel.js";
import { answerTooLarge, answerUndecodable } from "./channel-error.js";
import type { TryObserver } from "./call-observer.js";
import type { KeyScrubber } from "./key-scrubber.js";
import { contentDecoder } from "../net/content-decoder.js";

/** Receives an answer's body as it arrives (see {@link ChannelAnswer.pipe}). */
export interface AnswerReader {
  /** A decoded chunk. Returning false stops the flow until {@link AnswerFlow.resume}. */
  data(chunk: Buffer): boolean;
  /** The body is complete. */
  end(): void;
  /**
   * The body did not complete: a `ChannelError` (cut, too large, the channel
   * silent for its timeout), the call's abort reason, or what the request's
   * own body failed with (a form refused half-way).
   */
  error(err: Error): void;
}

/** A flow started by {@link ChannelAnswer.pipe}. */
export interface AnswerFlow {
  /** Lets the body flow again after a reader's `data` returned false. */
  resume(): void;
}

/** Limits of one read of an answer. */
export interface ReadOptions {
  /** Decoded bytes read at most; past it the call is cut and the reader gets `too_large`. */
  maxBytes?: number;
}

/**
 * A channel's answer that ends a call: its status and headers as the channel
 * sent them, and a body that waits (the connection paused) until one of
 * `read`, `pipe`, `chunks` or `discard` takes it. While it is read, the
 * channel's idle timeout counts only the time the reader is not holding the
 * flow back; an abort of the call cuts it. Bodies sent compressed despite
 * `Accept-Encoding: identity` arrive decoded.
 */
export interface ChannelAnswer {
  /** The channel that answered (for a forward key: bound to that key). */
  readonly channel: Channel;
  readonly status: number;
  /** Lower-case names, as the channel sent them. */
  readonly headers: IncomingHttpHeaders;
  /** Finds the credential this call sent, in any spelling, in what the answer holds. */
  readonly scrubber: KeyScrubber;
  /** Hears the try this answer ends (token usage, when a reader finds it); see `CallObserver`. */
  observer?: TryObserver | undefined;
  /** The whole body, decoded, at most `maxBytes`; rejects as {@link AnswerReader.error} says. */
  read(maxBytes: number): Promise<Buffer>;
  /** The body chunk by chunk, with backpressure: nothing is buffered here. */
  pipe(reader: AnswerReader, options?: ReadOptions): AnswerFlow;
  /** The body as an async iterable (events of a stream as they come); breaking off discards it. */
  chunks(options?: ReadOptions): AsyncIterableIterator<Buffer>;
  /** Drops the body, closing the connection if it is not complete. */
  discard(): void;
}

/** What an answer needs from the call it belongs to. */
export interface AnswerSource {
  pause(): void;
  resume(): void;
  /** Ends the call; the source then reports `err` through {@link StreamedAnswer.fail}. */
  abort(err: Error): void;
  /** Called once when the body ended, failed or was discarded. */
  settled(): void;
}

const NO_FLOW: AnswerFlow = { resume: () => undefined };

/** An answer whose body is still on the connection, fed by the call's handler. */
export class StreamedAnswer implements ChannelAnswer {
  observer: TryObserver | undefined;
  private reader: AnswerReader | undefined;
  private limit = Infinity;
  private received = 0;
  private decoder: Transform | undefined;
  private state: "waiting" | "flowing" | "ended" | "settled" = "waiting";
  /** What ended the body before a reader came. */
  private early: { error?: Error } | undefined;

  constructor(
    readonly channel: Channel,
    readonly status: number,
    readonly headers: IncomingHttpHeaders,
    readonly scrubber: KeyScrubber,
    private readonly source: AnswerSource,
  ) {}

  read(maxBytes: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      this.pipe(
        {
          data(chunk) {
            chunks.push(chunk);
            size += chunk.length;
            return true;
          },
          end: () =>
            resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size)),
          error: reject,
        },
        { maxBytes },
      );
    });
  }

  pipe(reader: AnswerReader, options: ReadOptions = {}): AnswerFlow {
    if (this.reader || this.state === "settled") {
      reader.error(new Error("The answer's body was already taken."));
      return NO_FLOW;
    }
    this.reader = reader;
    this.limit = options.maxBytes ?? Infinity;
    const encoding = this.headers["content-encoding"]?.trim().toLowerCase();
    if (encoding && encoding !== "identity") {
      const decoder = contentDecoder(encoding);
      if (!decoder) return this.refuse(answerUndecodable(this.channel.name));
      this.decode(decoder);
    } else if (Number(this.headers["content-length"]) > this.limit) {
      // Refused before reading: a declared length over the cap is never waited for.
      return this.refuse(answerTooLarge(this.limit, this.channel.name));
    }
    this.state = "flowing";
    if (this.early) {
      const { error } = this.early;
      if (error) this.fail(error);
      else this.end();
      return NO_FLOW;
    }
    this.source.resume();
    return {
      resume: () => {
        // "ended": a decoder may still hold decoded bytes back for this reader.
        if (this.state !== "flowing" && this.state !== "ended") return;
        if (this.decoder) this.decoder.resume();
        else this.source.resume();
      },
    };
  }

  chunks(options?: ReadOptions): AsyncIterableIterator<Buffer> {
    return iterate(this, options);
  }

  discard(): void {
    if (this.state === "settled") return;
    const open = this.state !== "ended" && !this.early;
    this.settle();
    if (open) this.source.abort(new Error("discarded"));
  }

  /** From the call: a body chunk. False pauses the connection until the reader resumes. */
  push(chunk: Buffer): boolean {
    if (this.state !== "flowing") return false;
    if (this.decoder) {
      if (this.decoder.write(chunk)) return true;
      this.decoder.once("drain", () => this.state === "flowing" && this.source.resume());
      return false;
    }
    return this.deliver(chunk);
  }

  /** From the call: the body is complete. */
  end(): void {
    if (this.state === "waiting") {
      this.early ??= {};
      return;
    }
    if (this.state !== "flowing") return;
    if (this.decoder) {
      this.state = "ended";
      this.decoder.end();
      return;
    }
    this.finish();
  }

  /** From the call (or the reader's own cap): the body broke off with `err`. */
  fail(err: Error): void {
    if (this.state === "waiting" && !this.reader) {
      this.early ??= { error: err };
      return;
    }
    if (this.state === "settled") return;
    const reader = this.reader;
    this.settle();
    this.decoder?.destroy();
    reader?.error(err);
  }

  private deliver(chunk: Buffer): boolean {
    this.received += chunk.length;
    if (this.received > this.limit) {
      const err = answerTooLarge(this.limit, this.channel.name);
      this.fail(err);
      this.source.abort(err);
      return false;
    }
    return (this.reader as AnswerReader).data(chunk);
  }

  private decode(decoder: Transform): void {
    this.decoder = decoder;
    decoder.on("data", (chunk: Buffer) => {
      if (this.state === "settled") return;
      if (!this.deliver(chunk)) decoder.pause();
    });
    decoder.once("end", () => this.finish());
    decoder.once("error", () => {
      const err = answerUndecodable(this.channel.name);
      this.fail(err);
      this.source.abort(err);
    });
  }

  private refuse(err: Error): AnswerFlow {
    this.state = "flowing";
    this.fail(err);
    this.source.abort(err);
    return NO_FLOW;
  }

  private finish(): void {
    if (this.state === "settled") return;
    const reader = this.reader;
    this.settle();
    reader?.end();
  }

  private settle(): void {
    this.state = "settled";
    this.reader = undefined;
    this.source.settled();
  }
}

/** An answer read whole already: a refusal kept while the next channel is tried. */
export class BufferedAnswer implements ChannelAnswer {
  observer: TryObserver | undefined;
  private taken = false;

  constructor(
    readonly channel: Channel,
    readonly status: number,
    readonly headers: IncomingHttpHeaders,
    readonly scrubber: KeyScrubber,
    private readonly body: Buffer,
  ) {}

  read(maxBytes: number): Promise<Buffer> {
    if (this.taken) return Promise.reject(new Error("The answer's body was already taken."));
    this.taken = true;
    return this.body.length > maxBytes
      ? Promise.reject(answerTooLarge(maxBytes, this.channel.name))
      : Promise.resolve(this.body);
  }

  pipe(reader: AnswerReader, options: ReadOptions = {}): AnswerFlow {
    this.read(options.maxBytes ?? Infinity).then(
      (body) => {
        if (body.length > 0) reader.data(body);
        reader.end();
      },
      (err: Error) => reader.error(err),
    );
    return NO_FLOW;
  }

  chunks(options?: ReadOptions): AsyncIterableIterator<Buffer> {
    return iterate(this, options);
  }

  discard(): void {
    this.taken = true;
  }
}

/** Chunks held for an iterating reader before the connection is paused. */
const ITERATOR_HIGH_WATER = 16;

/** {@link ChannelAnswer.chunks} on top of `pipe`: a short queue, paused when it fills. */
function iterate(answer: ChannelAnswer, options?: ReadOptions): AsyncIterableIterator<Buffer> {
  const queue: Buffer[] = [];
  let done = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  const flow = answer.pipe(
    {
      data(chunk) {
        queue.push(chunk);
        notify();
        return queue.length < ITERATOR_HIGH_WATER;
      },
      end() {
        done = true;
        notify();
      },
      error(err) {
        failure = err;
        notify();
      },
    },
    options,
  );
  const iterator: AsyncIterableIterator<Buffer> = {
    async next(): Promise<IteratorResult<Buffer>> {
      for (;;) {
        const chunk = queue.shift();
        if (chunk) {
          if (queue.length === ITERATOR_HIGH_WATER - 1) flow.resume();
          return { value: chunk, done: false };
        }
        if (failure) throw failure;
        if (done) return { value: undefined, done: true };
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
    async return(): Promise<IteratorResult<Buffer>> {
      if (!done && !failure) answer.discard();
      done = true;
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}
