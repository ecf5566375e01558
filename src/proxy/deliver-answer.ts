import type { ServerResponse } from "node:http";
import type { AnswerFlow, AnswerReader, ChannelAnswer } from "../channels/channel-answer.js";
import { answerNotJson } from "../channels/channel-error.js";
import { isJsonMediaType } from "../net/is-json-media-type.js";
import { JsonDocumentEnd } from "../net/json-document-end.js";
import { AFTER_DOCUMENT_MS } from "../net/read-to-document-end.js";
import { copyResponseHeaders } from "./forwarded-headers.js";
import { EventStreamTap } from "./event-stream-tap.js";
import { usageOf, type TokenUsage } from "./token-usage.js";

/** What {@link deliverAnswer} needs from the request it answers. */
export interface AnswerContext {
  /** Largest non-streamed answer read (`server.maxResponseBytes`). */
  maxBytes: number;
  /** Token usage the answer reported (for streams: the last event that had one). */
  onUsage(usage: TokenUsage): void;
  /**
   * Sees the parsed JSON answer before it is sent; the answer waits for the
   * returned promise (so a response id is recorded before the client has it).
   */
  onAnswer?(answer: unknown): Promise<void> | void;
  /** Sees the first events of a stream, until it returns true; never delays them. */
  onEvent?(event: unknown): boolean;
  /**
   * How many images an image stream delivers (its last event is the last
   * one's `*.completed`); `undefined` when not an image route or not known.
   */
  streamImages?(): number | undefined;
  /** Hands an error to the one error writer (nothing was sent yet). */
  fail(err: unknown): void;
  clientGone(): boolean;
}

/** Statuses that carry no body. */
const NO_BODY = new Set([204, 205, 304]);

/**
 * Passes a channel's successful answer on. A JSON answer is read whole (up
 * to `maxBytes`; one of unknown length up to its object's end), must parse,
 * and only then goes out with its own
 * Content-Length: one that breaks off, is too large, stalls past the
 * channel's timeout or is not JSON ends in 502 `invalid_response` / 504
 * `upstream_timeout`, never a 200 with a broken body, and never another
 * channel (this one may have run, and billed, the request). Event streams and
 * binary answers (speech) go on chunk by chunk as they arrive (with the
 * channel's Content-Length when it sent one), held back only while the client
 * reads slower than the channel sends; event streams carry
 * `X-Accel-Buffering: no` and `Cache-Control: no-cache` for an nginx in
 * front. Every byte and allowed header is scrubbed of the credential sent.
 */
export function deliverAnswer(
  answer: ChannelAnswer,
  res: ServerResponse,
  context: AnswerContext,
): void {
  const { status, headers, scrubber } = answer;
  const contentType = String(headers["content-type"] ?? "");
  const setHeader = (name: string, value: string | string[]) => res.setHeader(name, value);

  if (NO_BODY.has(status) || headers["content-length"] === "0") {
    // Read to its (empty) end, so the connection stays in the pool.
    void answer.read(0).catch(() => undefined);
    res.statusCode = status;
    copyResponseHeaders(headers, setHeader, scrubber.scrubText);
    res.end();
    return;
  }

  if (isJsonMediaType(contentType)) {
    answer.pipe(new JsonAnswer(answer, res, context), { maxBytes: context.maxBytes });
    return;
  }

  res.statusCode = status;
  copyResponseHeaders(headers, setHeader, scrubber.scrubText);
  // An answer passed on as it came keeps its length (speech, files): a client sees its size,
  // and a cut one as cut. Not one decoded here, whose length the channel did not send.
  const length = headers["content-length"];
  const sameBytes = length !== undefined && isIdentity(headers["content-encoding"]);
  if (sameBytes) res.setHeader("content-length", length);
  const eventStream = contentType.startsWith("text/event-stream");
  if (eventStream) {
    res.setHeader("cache-control", "no-cache");
    res.setHeader("x-accel-buffering", "no");
    res.flushHeaders();
  }
  streamTo(res, answer, context, eventStream, sameBytes);
}

/**
 * Reads a JSON answer whole, checks it and sends it on: a reader object
 * rather than a promise and closures, as this is every chat answer's path.
 * An answer without a Content-Length (chunked) is read up to its top-level
 * object's end and sent then: one held open after it (a proxy or CDN that
 * never sends the last chunk) would otherwise throw the paid answer away
 * after the channel's timeout. What follows the object is dropped, its end
 * waited for {@link AFTER_DOCUMENT_MS} (so the connection is reused).
 */
class JsonAnswer implements AnswerReader {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** Where the document closes, for an answer of unknown length only (a scan's cost). */
  private readonly documentEnd: JsonDocumentEnd | undefined;
  /** Set once the document was taken before the answer's end: what follows is dropped. */
  private afterDocument: NodeJS.Timeout | undefined;

  constructor(
    private readonly answer: ChannelAnswer,
    private readonly res: ServerResponse,
    private readonly context: AnswerContext,
  ) {
    if (answer.headers["content-length"] === undefined) this.documentEnd = new JsonDocumentEnd();
  }

  data(chunk: Buffer): boolean {
    if (this.afterDocument !== undefined) return true;
    const at = this.documentEnd === undefined ? -1 : this.documentEnd.push(chunk);
    if (at === -1) {
      this.chunks.push(chunk);
      this.size += chunk.length;
      return true;
    }
    this.chunks.push(chunk.subarray(0, at));
    this.size += at;
    this.afterDocument = dropRestAfterGrace(this.answer);
    this.take();
    return true;
  }

  end(): void {
    if (this.afterDocument !== undefined) clearTimeout(this.afterDocument);
    else this.take();
  }

  error(err: Error): void {
    // After the document, a failure (more than it may hold, a cut) is only the rest's.
    if (this.afterDocument !== undefined) clearTimeout(this.afterDocument);
    else if (!this.context.clientGone()) this.context.fail(err);
  }

  /** Checks the document read and sends it on. */
  private take(): void {
    const { chunks } = this;
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, this.size);
    if (this.context.clientGone()) return;
    let parsed: unknown;
    try {
      // Whole: a byte scan that checks it and reads only the members used costs more
      // instructions than V8's parser (measured with callgrind: 56k against 23k for 1 KB).
      parsed = JSON.parse(body.toString("utf8"));
    } catch {
      this.context.fail(answerNotJson(this.answer.channel.name));
      return;
    }
    const usage = usageOf(parsed);
    if (usage) this.context.onUsage(usage);
    const recorded = this.context.onAnswer?.(parsed);
    if (recorded) void recorded.then(() => this.send(body));
    else this.send(body);
  }

  private send(body: Buffer): void {
    const { res, answer } = this;
    if (this.context.clientGone()) return;
    const { scrubber } = answer;
    const out = scrubber.scrub(body);
    res.statusCode = answer.status;
    copyResponseHeaders(
      answer.headers,
      (name, value) => res.setHeader(name, value),
      scrubber.scrubText,
    );
    res.setHeader("content-length", out.length);
    res.end(out);
  }
}

function isIdentity(encoding: string | undefined): boolean {
  return encoding === undefined || encoding.trim().toLowerCase() === "identity";
}

/**
 * Passes a streamed answer on, scrubbed, held back while the client reads
 * slower. An event stream ends for the client at its last event (`[DONE]`, a
 * Responses stream's `response.completed`, an image stream's last image...): a channel or proxy that holds
 * it open after that would otherwise keep the client (whose SDK reads to the
 * stream's end) waiting for the channel's timeout and then cut it. The rest
 * (of a stream without a length) is dropped as a JSON answer's is after its object.
 */
function streamTo(
  res: ServerResponse,
  answer: ChannelAnswer,
  context: AnswerContext,
  eventStream: boolean,
  keepLength: boolean,
): void {
  const tap = eventStream
    ? new EventStreamTap(context.onEvent, context.streamImages?.())
    : undefined;
  const scrub = answer.scrubber.stream(keepLength);
  let waiting = false;
  // One with a length ends at it: bytes after its last event are still its own.
  const endsAtLast = eventStream && answer.headers["content-length"] === undefined;
  let afterLast: NodeJS.Timeout | undefined;
  const finish = (out?: Buffer) => {
    if (res.destroyed) return;
    const rest = scrub.flush();
    // The last chunk passed on with what the scrubber held back, in one write.
    const last = !out?.length ? rest : rest.length === 0 ? out : Buffer.concat([out, rest]);
    res.end(last.length > 0 ? last : undefined);
    tap?.end();
    if (tap?.usage) context.onUsage(tap.usage);
  };
  // Chunks come later, from the connection: `flow` is set by then.
  const flow: AnswerFlow = answer.pipe({
    data(chunk) {
      if (afterLast !== undefined) return true;
      if (res.destroyed) return false;
      const out = scrub.push(chunk);
      tap?.push(chunk);
      if (endsAtLast && tap?.finished) {
        afterLast = dropRestAfterGrace(answer);
        finish(out);
        return true;
      }
      if (out.length === 0 || res.write(out)) return true;
      if (!waiting) {
        waiting = true;
        res.once("drain", () => {
          waiting = false;
          flow.resume();
        });
      }
      return false;
    },
    end() {
      if (afterLast !== undefined) clearTimeout(afterLast);
      else finish();
    },
    // A cut stream must look cut to the client, never complete (but one past its last event is).
    error() {
      if (afterLast !== undefined) clearTimeout(afterLast);
      else res.destroy();
    },
  });
}

/**
 * Drops what an answer still sends after the part passed on (its JSON object,
 * its stream's last event) once {@link AFTER_DOCUMENT_MS} passed, closing the
 * connection; the reader clears the timer when the answer ends (or fails) first.
 */
function dropRestAfterGrace(answer: ChannelAnswer): NodeJS.Timeout {
  return setTimeout(() => answer.discard(), AFTER_DOCUMENT_MS).unref();
}
