import { describe, expect, it } from "vitest";
import { SseParser, readEventStream, type SseEvent } from "../../console/src/sse.js";

function parse(pieces: string[]): SseEvent[] {
  const events: SseEvent[] = [];
  const parser = new SseParser((event) => events.push(event));
  for (const piece of pieces) parser.push(piece);
  return events;
}

/** The stream cut into two pieces at every place, and into single characters. */
function everySplit(text: string): string[][] {
  const splits = [[text], [...text]];
  for (let at = 1; at < text.length; at += 1) splits.push([text.slice(0, at), text.slice(at)]);
  return splits;
}

const TASK_STREAM =
  ": keep-alive\r\n\r\n" +
  'id: 0\r\nevent: image.task.queued\r\ndata: {"id":"task_a"}\r\n\r\n' +
  'id: 1.1\nevent: image.task.partial_image\ndata: {"a":1,\ndata: "b":2}\n\n' +
  "event: note\rdata:no space\r\r" +
  "id: final\nevent: image.task.completed\ndata: {}\n\n" +
  "event: cut off\ndata: never dispatched";

describe("SseParser", () => {
  it("reads the same events however the stream is cut, with CRLF, LF and CR line ends", () => {
    const expected: SseEvent[] = [
      { id: "0", event: "image.task.queued", data: '{"id":"task_a"}' },
      { id: "1.1", event: "image.task.partial_image", data: '{"a":1,\n"b":2}' },
      // `id:` persists until the next one, as EventSource's lastEventId does.
      { id: "1.1", event: "note", data: "no space" },
      { id: "final", event: "image.task.completed", data: "{}" },
    ];
    for (const pieces of everySplit(TASK_STREAM)) {
      expect(parse(pieces), JSON.stringify(pieces.slice(0, 2))).toEqual(expected);
    }
  });

  it("names an event without `event:` a message, and skips blocks without data", () => {
    expect(parse(["data: x\n\nevent: empty\n\nretry: 10\nfoo: bar\ndata\n\n"])).toEqual([
      { event: "message", data: "x" },
      { event: "message", data: "" },
    ]);
  });
});

describe("readEventStream", () => {
  it("decodes UTF-8 split between chunks and ends with the stream", async () => {
    const bytes = new TextEncoder().encode('event: e\ndata: {"prompt":"löwe 🦁"}\n\n');
    const chunks = [bytes.slice(0, 25), bytes.slice(25, 27), bytes.slice(27)];
    let cancelled = false;
    const reader = {
      read: async () => {
        const value = chunks.shift();
        return value ? { done: false, value } : { done: true };
      },
      cancel: async () => {
        cancelled = true;
      },
    };
    const events: SseEvent[] = [];
    await readEventStream(reader, (event) => events.push(event));
    expect(events).toEqual([{ event: "e", data: '{"prompt":"löwe 🦁"}' }]);
    expect(cancelled).toBe(true);
  });
});
