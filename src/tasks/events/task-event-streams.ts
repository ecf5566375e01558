import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Principal } from "../../auth/principal.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { TaskView } from "../present-task.js";
import { openFirstImage, splitView, writeSplitView } from "../send-task-view.js";
import type { TaskRecord } from "../task-record.js";
import type { StageEvent } from "./event-ids.js";
import { parseEventId } from "./event-ids.js";
import type { TaskFeed } from "./task-feed.js";
import { runEventStream, type EventSink } from "./task-event-stream.js";

/** The headers of every task event stream: nginx and CDNs must pass each event on at once. */
export const EVENT_STREAM_HEADERS = {
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  "X-Accel-Buffering": "no",
} as const;

/** Bytes a client may leave unread before its stream is cut (it is not reading). */
const MAX_UNREAD_BYTES = 64 * 1024 * 1024;

/** Dependencies of {@link createTaskEventStreams}. */
export interface TaskEventStreamsDeps {
  feed: TaskFeed;
  /** A task the principal owns, else 404 `task_not_found` (as `GET` reads it). */
  read(principal: Principal, id: string): Promise<TaskRecord>;
  /** The task as `GET` shows it, image links on `baseUrl`. */
  present(record: TaskRecord, baseUrl: string): Promise<TaskView>;
  /** A comment line this often keeps idle streams open through proxies. Default 15 s. */
  keepAliveMs: number;
  metrics: Metrics;
  logger: Logger;
}

/** The task event streams this process serves. */
export type TaskEventStreams = ReturnType<typeof createTaskEventStreams>;

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
  view: TaskView,
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
 * `GET /v1/images/tasks/{id}/events` and a submission's stream
 * (`Accept: text/event-stream`): each an SSE answer fed by the process's task
 * feed (see {@link runEventStream}). One timer for all of them writes the
 * keep-alive comments, so an open stream costs its socket, a set entry and
 * the feed's, and nothing while its task is quiet.
 */
export function createTaskEventStreams(deps: TaskEventStreamsDeps) {
  const { feed, metrics, logger } = deps;
  const open = new Set<ServerResponse>();
  let ticker: NodeJS.Timeout | undefined;

  const track = (res: ServerResponse) => {
    open.add(res);
    metrics.taskEventWatchers.inc();
    ticker ??= setInterval(() => {
      for (const stream of open) stream.write(": keep-alive\n\n");
    }, deps.keepAliveMs);
    ticker.unref();
  };
  const untrack = (res: ServerResponse) => {
    if (!open.delete(res)) return;
    metrics.taskEventWatchers.dec();
    if (open.size === 0) {
      clearInterval(ticker);
      ticker = undefined;
    }
  };

  /** The SSE answer `res` as a sink; `headers` go with the stream's own. */
  function sinkOf(
    res: ServerResponse,
    baseUrl: string,
    headers: Record<string, string>,
  ): EventSink {
    const gone = new AbortController();
    res.once("close", () => {
      untrack(res);
      gone.abort();
    });
    return {
      signal: gone.signal,
      open() {
        res.writeHead(200, { ...headers, ...EVENT_STREAM_HEADERS });
        // The headers go now, not with the first event: the client knows it is connected.
        res.flushHeaders();
        track(res);
      },
      async send(event, record) {
        const view = await deps.present(record, baseUrl);
        if (gone.signal.aborted || res.writableEnded) return false;
        await writeEvent(res, event, view, gone.signal);
        metrics.taskEventsSent.inc({ event: event.stage });
        if (res.writableLength > MAX_UNREAD_BYTES) res.destroy();
        return true;
      },
      noContent() {
        res.writeHead(204, { "Cache-Control": "no-store" }).end();
      },
      end() {
        untrack(res);
        res.end();
      },
    };
  }

  const onLateError = (err: unknown) =>
    logger.warn({ err }, "a task event stream ended early; its client resumes");

  return {
    /**
     * `GET /v1/images/tasks/{id}/events`, resuming after `Last-Event-ID`. A
     * task the principal cannot see rejects before anything is written.
     */
    async watch(
      req: IncomingMessage,
      res: ServerResponse,
      principal: Principal,
      id: string,
      baseUrl: string,
    ): Promise<void> {
      if (req.method === "HEAD") {
        await deps.read(principal, id);
        res.writeHead(200, EVENT_STREAM_HEADERS).end();
        return;
      }
      const lastId = req.headers["last-event-id"];
      await runEventStream({
        taskId: id,
        feed,
        read: () => deps.read(principal, id),
        after: parseEventId(Array.isArray(lastId) ? lastId[0] : lastId),
        sink: sinkOf(res, baseUrl, {}),
        onLateError,
      });
    },

    /**
     * A submission's answer as a stream: the new task's `queued` event (or,
     * replayed, the events the task's state stands for), then as `watch`.
     */
    async watchSubmitted(
      res: ServerResponse,
      principal: Principal,
      record: TaskRecord,
      baseUrl: string,
      headers: Record<string, string>,
    ): Promise<void> {
      await runEventStream({
        taskId: record.id,
        feed,
        read: () => deps.read(principal, record.id),
        known: record,
        sink: sinkOf(res, baseUrl, headers),
        onLateError,
      });
    },

    /** Streams open now. */
    get size() {
      return open.size;
    },
  };
}
