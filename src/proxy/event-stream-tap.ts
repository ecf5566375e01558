import { usageOf, type TokenUsage } from "./token-usage.js";

const USAGE_MARK = Buffer.from('"usage"');
const DONE_MARK = Buffer.from("[DONE]");
/** Longer events are not `data: [DONE]` (with an `event:` or `id:` line at most). */
const MAX_DONE_EVENT = 128;
const LF = 0x0a;
/** Events larger than this are passed on but not read for usage. */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;

/**
 * Watches an event stream for token usage and for the events a caller asks
 * about, without holding a byte back: chunks are only looked at after they
 * were passed on. Keeps the current unfinished event and parses only events
 * that mention `"usage"` (the last one of a chat stream, `response.completed`
 * of the Responses API) or, while `wantEvent` is set, the first events.
 */
export class EventStreamTap {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private skipping = false;
  private endedInLineFeed = false;
  /** The last usage the stream reported. */
  usage: TokenUsage | undefined;
  /**
   * The stream's last event was seen: a chat or completions stream's
   * `data: [DONE]`, a Responses stream's `response.completed`, `.failed`
   * or `.incomplete` (which carry `usage`, so they are read), or an image
   * stream's last image (`imagesLeft`).
   */
  finished = false;
  /** The head and the end of the event being skipped (too large to keep), for its type. */
  private skippedHead: Buffer | undefined;
  private skippedTail: Buffer | undefined;

  /** Events still shown to `wantEvent`. */
  private eventsLeft = 8;

  /**
   * @param wantEvent called with each of the first events until it returns true
   * @param imagesLeft for an image stream, the images it delivers: it is
   *   finished at the last one's `image_generation.completed` or
   *   `image_edit.completed` event
   */
  constructor(
    private wantEvent?: (event: unknown) => boolean,
    private imagesLeft?: number,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    // A blank line split across two chunks.
    if (this.endedInLineFeed) {
      if (chunk[0] === LF) start = 1;
      else if (chunk[0] === 0x0d && chunk[1] === LF) start = 2;
      if (start > 0) this.finishEvent();
    }
    this.endedInLineFeed = chunk[chunk.length - 1] === LF;
    for (;;) {
      const end = eventEnd(chunk, start);
      if (end === -1) break;
      this.take(chunk.subarray(start, end));
      this.finishEvent();
      start = end;
    }
    if (start < chunk.length) this.take(chunk.subarray(start));
  }

  /** The stream ended: a last event without its blank line still counts. */
  end(): void {
    this.finishEvent();
  }

  private take(piece: Buffer): void {
    if (!this.skipping) {
      this.pendingBytes += piece.length;
      if (this.pendingBytes <= MAX_EVENT_BYTES) {
        this.pending.push(piece);
        return;
      }
      this.skipping = true;
      this.pending.push(piece);
      if (this.imagesLeft !== undefined) this.skippedHead = headOf(this.pending);
      this.pending = [];
    }
    // An image stream's final image may name its type after the image: its end is kept too.
    if (this.imagesLeft !== undefined) this.skippedTail = tailOf(this.skippedTail, piece);
  }

  private finishEvent(): void {
    const pieces = this.pending;
    const skipped = this.skipping;
    const { skippedHead, skippedTail } = this;
    this.pending = [];
    this.pendingBytes = 0;
    this.skipping = false;
    this.skippedHead = undefined;
    this.skippedTail = undefined;
    if (skipped) {
      if (skippedHead) this.countImage(skippedHead, undefined, skippedTail);
      return;
    }
    if (pieces.length === 0) return;
    const event = pieces.length === 1 ? (pieces[0] as Buffer) : Buffer.concat(pieces);
    if (
      event.length <= MAX_DONE_EVENT &&
      event.indexOf(DONE_MARK) !== -1 &&
      dataOf(event) === "[DONE]"
    ) {
      this.finished = true;
      return;
    }
    const wanted = this.wantEvent !== undefined;
    const data = wanted || event.indexOf(USAGE_MARK) !== -1 ? dataOf(event) : undefined;
    let parsed: unknown;
    try {
      parsed = data === undefined ? undefined : JSON.parse(data);
    } catch {
      // Not JSON: nothing to read in it, but an image stream's event is still counted.
    }
    if (this.imagesLeft !== undefined) this.countImage(event, parsed);
    if (parsed === undefined) return;
    this.usage = usageOf(parsed) ?? this.usage;
    if (isLastResponseEvent(parsed)) this.finished = true;
    if (this.wantEvent && (this.wantEvent(parsed) || --this.eventsLeft === 0)) {
      this.wantEvent = undefined;
    }
  }

  /**
   * Counts an image stream's final images: finished at the last one's. An
   * event not parsed is told by its head or its end (`tail`, default the
   * event's own).
   */
  private countImage(event: Buffer, parsed: unknown, tail?: Buffer): void {
    const type = (parsed as { type?: unknown } | null | undefined)?.type;
    const end = tail ?? event;
    const completed =
      typeof type === "string"
        ? IMAGE_COMPLETED_TYPES.has(type)
        : IMAGE_COMPLETED.test(event.toString("latin1", 0, HEAD_BYTES)) ||
          IMAGE_COMPLETED.test(end.toString("latin1", Math.max(0, end.length - HEAD_BYTES)));
    if (completed && (this.imagesLeft = (this.imagesLeft as number) - 1) === 0) {
      this.finished = true;
    }
  }
}

const IMAGE_COMPLETED_TYPES = new Set(["image_generation.completed", "image_edit.completed"]);

/** Bytes of an event's head, and of its end, read for its type when it is not parsed. */
const HEAD_BYTES = 512;
/**
 * An image stream's event that delivers a final image: named so in its
 * `event:` line, or as the `type` of its data (which OpenAI writes first,
 * before the image; a gateway's encoder may write it last, after it).
 */
const IMAGE_COMPLETED =
  /(?:^|\n)event: ?image_(?:generation|edit)\.completed\r?$|"type"\s*:\s*"image_(?:generation|edit)\.completed"/m;

/** The first {@link HEAD_BYTES} of an event's pieces (at least one). */
function headOf(pieces: Buffer[]): Buffer {
  const first = pieces[0] as Buffer;
  if (first.length >= HEAD_BYTES || pieces.length === 1) return first.subarray(0, HEAD_BYTES);
  return Buffer.concat(pieces).subarray(0, HEAD_BYTES);
}

/** The last {@link HEAD_BYTES} of what `tail` ended with, followed by `piece`. */
function tailOf(tail: Buffer | undefined, piece: Buffer): Buffer {
  if (piece.length >= HEAD_BYTES || tail === undefined) {
    return piece.subarray(Math.max(0, piece.length - HEAD_BYTES));
  }
  const joined = Buffer.concat([tail, piece]);
  return joined.subarray(Math.max(0, joined.length - HEAD_BYTES));
}

/** Index just past the blank line ending the event that starts at or after `from`, or -1. */
function eventEnd(chunk: Buffer, from: number): number {
  for (let i = chunk.indexOf(LF, from); i !== -1; i = chunk.indexOf(LF, i + 1)) {
    const next = chunk[i + 1];
    if (next === LF) return i + 2;
    if (next === 0x0d && chunk[i + 2] === LF) return i + 3;
  }
  return -1;
}

/** The `data:` lines of one event, joined as the SSE spec says. */
function dataOf(event: Buffer): string | undefined {
  let data: string | undefined;
  for (const line of event.toString("utf8").split(/\r?\n/)) {
    if (!line.startsWith("data:")) continue;
    const value = line.slice(line[5] === " " ? 6 : 5);
    data = data === undefined ? value : `${data}\n${value}`;
  }
  return data;
}

const LAST_RESPONSE_EVENTS = new Set([
  "response.completed",
  "response.failed",
  "response.incomplete",
]);

/** A Responses stream's last event: nothing follows it. */
function isLastResponseEvent(event: unknown): boolean {
  const type = (event as { type?: unknown } | null)?.type;
  return typeof type === "string" && LAST_RESPONSE_EVENTS.has(type);
}
