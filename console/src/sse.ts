/** One server-sent event, as the WHATWG event-stream rules read it. */
export interface SseEvent {
  /** The stream's last event id when this event was dispatched (`id:` lines persist). */
  id?: string;
  /** `event:`; `message` when absent. */
  event: string;
  /** The `data:` lines, joined with newlines. */
  data: string;
}

/**
 * Parses an event stream fed in pieces of any size (a line, a CRLF, even a
 * character may be cut between two): lines end with CRLF, LF or CR;
 * comments (`:`) and unknown fields are skipped; an event is dispatched at a
 * blank line when it has data; what is left unfinished at the end is dropped.
 */
export class SseParser {
  private buffer = "";
  /** A CR ended the last piece: a LF starting the next one belongs to it. */
  private afterCr = false;
  private data: string[] = [];
  private type = "";
  private lastId: string | undefined;

  constructor(private readonly onEvent: (event: SseEvent) => void) {}

  push(text: string): void {
    let chunk = text;
    if (this.afterCr && chunk.startsWith("\n")) chunk = chunk.slice(1);
    this.afterCr = false;
    this.buffer += chunk;
    for (;;) {
      const end = this.buffer.search(/[\r\n]/);
      if (end < 0) return;
      const line = this.buffer.slice(0, end);
      let next = end + 1;
      if (this.buffer[end] === "\r") {
        if (next === this.buffer.length) this.afterCr = true;
        else if (this.buffer[next] === "\n") next += 1;
      }
      this.buffer = this.buffer.slice(next);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.type = value;
    else if (field === "id" && !value.includes("\0")) this.lastId = value;
  }

  private dispatch(): void {
    const data = this.data;
    const type = this.type;
    this.data = [];
    this.type = "";
    if (data.length === 0) return;
    this.onEvent({
      ...(this.lastId === undefined ? {} : { id: this.lastId }),
      event: type || "message",
      data: data.join("\n"),
    });
  }
}

/** A `fetch` body's reader, as far as reading events needs it. */
export interface ByteReader {
  read(): Promise<{ done: boolean; value?: Uint8Array }>;
  cancel(reason?: unknown): Promise<void>;
}

/**
 * Reads an event stream from a `fetch` body until it ends, calling `onEvent`
 * for each event as it arrives. `EventSource` would be simpler, but it
 * cannot send an `Authorization` header, and the key never goes in a URL.
 */
export async function readEventStream(
  reader: ByteReader,
  onEvent: (event: SseEvent) => void,
): Promise<void> {
  const decoder = new TextDecoder();
  const parser = new SseParser(onEvent);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (value) parser.push(decoder.decode(value, { stream: true }));
    }
    parser.push(decoder.decode());
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
