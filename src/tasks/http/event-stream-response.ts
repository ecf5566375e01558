import type { ServerResponse } from "node:http";
import { openFirstImage, splitView, writeSplitView, type ShownView } from "./send-task-view.js";
import type { TaskRecord } from "../core/task-record.js";
import type { StageEvent } from "../events/event-ids.js";
import type { EventSink } from "../events/watch-task-events.js";
import type { OpenStreams } from "./open-streams.js";

/** The headers of every task event stream: nginx and CDNs must pass each event on at once. */
export const EVENT_STREAM_HEADERS = {
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  "X-Accel-Buffering": "no",
} as const;

/** Bytes a client may leave unread before its stream is cut (it is not reading). */
const MAX_UNREAD_BYTES = 64 * 1024 * 1024;

/**
 * Writes one `text/event-stream` event: `id`, `event`, and the task as
 * `data` on one line (a partial event's also names `partial_image_index`),
 * its `b64_json` payloads streamed from the image store as `GET` sends them.
 * A failure once the event is begun cuts the connection: a client must never
 * take half an event for a whole one.
 */
async function writeEvent(
  res: ServerResponse,
  event: StageEvent,
  view: ShownView,
  signal: AbortSignal,
): Promise<void> {
  const data =
    event.partialIndex === undefined ? view : { ...view, partial_image_index: event.partialIndex };
  const split = splitView(data);
  const first = await openFirstImage(view, split, signal);
  res.write(`id: ${event.id}\nevent: image.task.${event.stage}\ndata: `);
  try {
    await writeSplitView(res, split, first, signal);
  } catch (err) {
    res.destroy();
    throw err;
  }
  res.write("\n\n");
}

/**
 * An SSE answer as an {@link EventSink}, one object per stream: the task as
 * `GET` shows it, with image links on `baseUrl`; `headers` go with the
 * stream's own. Its signal aborts when the connection closes.
 */
export class EventStreamResponse implements EventSink {
  readonly signal: AbortSignal;
  private readonly gone = new AbortController();

  constructor(
    private readonly streams: OpenStreams,
    private readonly res: ServerResponse,
    private readonly baseUrl: string,
    private readonly headers: Record<string, string>,
  ) {
    this.signal = this.gone.signal;
    res.once("close", () => {
      streams.untrack(res);
      this.gone.abort();
    });
  }

  open(): void {
    this.res.writeHead(200, { ...this.headers, ...EVENT_STREAM_HEADERS });
    // The headers go now, not with the first event: the client knows it is connected.
    this.res.flushHeaders();
    this.streams.track(this.res);
  }

  async send(event: StageEvent, record: TaskRecord): Promise<boolean> {
    const { res, streams } = this;
    const view = await streams.deps.present(record, this.baseUrl);
    if (this.signal.aborted || res.writableEnded) return false;
    streams.writing.add(res);
    try {
      await writeEvent(res, event, view, this.signal);
    } finally {
      streams.writing.delete(res);
    }
    streams.deps.metrics.taskEventsSent.inc({ event: event.stage });
    if (res.writableLength > MAX_UNREAD_BYTES) streams.cut(res, "unread_bytes");
    return true;
  }

  noContent(): void {
    this.res.writeHead(204, { "Cache-Control": "no-store" }).end();
  }

  end(): void {
    this.streams.untrack(this.res);
    this.res.end();
  }
}
