import { describe, expect, it } from "vitest";
import {
  EventTooLargeError,
  parseEventStream,
  type ServerSentEvent,
} from "../../src/net/parse-event-stream.js";

async function* chunks(...parts: Array<string | Uint8Array>) {
  for (const part of parts) yield typeof part === "string" ? new TextEncoder().encode(part) : part;
}

async function read(source: AsyncIterable<Uint8Array>, max = 1024): Promise<ServerSentEvent[]> {
  const events: ServerSentEvent[] = [];
  for await (const event of parseEventStream(source, max)) events.push(event);
  return events;
}

describe("parseEventStream", () => {
  it("reads events split anywhere, with CRLF, CR or LF, skipping comments and unknown fields", async () => {
    const text =
      ": hello\r\nid: 1\r\nevent: a\r\ndata: x\r\ndata:y\r\nretry: 5\r\n\r\ndata: z\rfoo: 1\r\r";
    for (const size of [1, 2, 3, 7, text.length]) {
      const parts: string[] = [];
      for (let i = 0; i < text.length; i += size) parts.push(text.slice(i, i + size));
      expect(await read(chunks(...parts))).toEqual([
        { event: "a", data: "x\ny", id: "1" },
        { event: "message", data: "z", id: "1" },
      ]);
    }
  });

  it("keeps a multi-byte character split between chunks, and drops an unfinished event", async () => {
    const bytes = new TextEncoder().encode("data: caf\u00e9\n\ndata: cut");
    const at = bytes.indexOf(0xc3) + 1;
    expect(await read(chunks(bytes.subarray(0, at), bytes.subarray(at)))).toEqual([
      { event: "message", data: "caf\u00e9", id: undefined },
    ]);
  });

  it("refuses an event larger than the limit, also before its line ends", async () => {
    await expect(read(chunks(`data: ${"x".repeat(100)}\n\n`), 50)).rejects.toBeInstanceOf(
      EventTooLargeError,
    );
    await expect(read(chunks("data: ", "x".repeat(100)), 50)).rejects.toBeInstanceOf(
      EventTooLargeError,
    );
  });
});
