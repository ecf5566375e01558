/** One server-sent event. */
export interface ServerSentEvent {
  /** The `event:` field; `message` when there was none. */
  event: string;
  /** The `data:` lines joined by newlines. */
  data: string;
  /** The `id:` field, when the event had one. */
  id?: string;
}

/** An event (its data lines together) grew past the limit the reader set. */
export class EventTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`an event of the stream is larger than ${maxBytes} bytes`);
  }
}

/**
 * Reads a `text/event-stream` body as it arrives (WHATWG rules: lines end
 * with CR, LF or CRLF; comments and unknown fields are skipped; an event is
 * dispatched at a blank line and only when it has data). Text is decoded
 * once per chunk and kept no longer than the event being read, which may
 * hold at most `maxEventBytes` characters; a stream that ends mid-event
 * drops it, as browsers do.
 *
 * @throws EventTooLargeError past `maxEventBytes`
 */
export async function* parseEventStream(
  body: AsyncIterable<Uint8Array>,
  maxEventBytes: number,
): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  let pending = "";
  let data: string[] = [];
  let size = 0;
  let event: string | undefined;
  let id: string | undefined;
  /** The previous chunk ended with CR: a LF starting this one belongs to it. */
  let afterCr = false;

  const take = (line: string): ServerSentEvent | undefined => {
    if (line === "") {
      const dispatched =
        data.length > 0 ? { event: event ?? "message", data: data.join("\n"), id } : undefined;
      data = [];
      size = 0;
      event = undefined;
      return dispatched;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      size += value.length + 1;
      if (size > maxEventBytes) throw new EventTooLargeError(maxEventBytes);
      data.push(value);
    } else if (field === "event") {
      event = value;
    } else if (field === "id" && !value.includes("\0")) {
      id = value;
    }
    return undefined;
  };

  for await (const chunk of body) {
    let text = decoder.decode(chunk, { stream: true });
    if (afterCr && text.startsWith("\n")) text = text.slice(1);
    afterCr = false;
    // A long line comes in many chunks: only the new text is searched for its end.
    let from = pending.length;
    pending += text;
    let start = 0;
    for (;;) {
      const cr = pending.indexOf("\r", from);
      const lf = pending.indexOf("\n", from);
      const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
      if (end === -1) break;
      const dispatched = take(pending.slice(start, end));
      if (pending[end] === "\r") {
        if (end + 1 === pending.length) afterCr = true;
        start = pending[end + 1] === "\n" ? end + 2 : end + 1;
      } else {
        start = end + 1;
      }
      from = start;
      if (dispatched) yield dispatched;
    }
    pending = pending.slice(start);
    if (pending.length + size > maxEventBytes) throw new EventTooLargeError(maxEventBytes);
  }
}
