import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Principal } from "../../auth/principal.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { TaskView } from "../view/present-task.js";
import type { TaskRecord } from "../task-record.js";
import { parseEventId } from "./event-ids.js";
import { EVENT_STREAM_HEADERS, EventStreamResponse } from "./event-stream-response.js";
import type { TaskFeed } from "./task-feed.js";
import { runEventStream } from "./task-event-stream.js";

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
export interface TaskEventStreams {
  /**
   * `GET /v1/images/tasks/{id}/events`, resuming after `Last-Event-ID`. A
   * task the principal cannot see rejects before anything is written.
   */
  watch(
    req: IncomingMessage,
    res: ServerResponse,
    principal: Principal,
    id: string,
    baseUrl: string,
  ): Promise<void>;
  /**
   * A submission's answer as a stream: the new task's `queued` event (or,
   * replayed, the events the task's state stands for), then as `watch`.
   */
  watchSubmitted(
    res: ServerResponse,
    principal: Principal,
    record: TaskRecord,
    baseUrl: string,
    headers: Record<string, string>,
  ): Promise<void>;
  /** Streams open now. */
  readonly size: number;
}

/**
 * The streams open in this process, and the one timer that writes their
 * keep-alive comments while any is open.
 */
export class OpenStreams {
  readonly open = new Set<ServerResponse>();
  /**
   * Streams in the middle of writing an event (its images come in pieces, with
   * waits): a keep-alive comment written then would land inside its `data:` line.
   */
  readonly writing = new WeakSet<ServerResponse>();
  private ticker: NodeJS.Timeout | undefined;

  constructor(readonly deps: TaskEventStreamsDeps) {}

  track(res: ServerResponse): void {
    this.open.add(res);
    this.deps.metrics.taskEventWatchers.inc();
    this.ticker ??= setInterval(() => {
      for (const stream of this.open) {
        if (!this.writing.has(stream)) stream.write(": keep-alive\n\n");
      }
    }, this.deps.keepAliveMs);
    this.ticker.unref();
  }

  untrack(res: ServerResponse): void {
    if (!this.open.delete(res)) return;
    this.deps.metrics.taskEventWatchers.dec();
    if (this.open.size === 0) {
      clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }

  readonly onLateError = (err: unknown): void =>
    this.deps.logger.warn({ err }, "a task event stream ended early; its client resumes");
}

/**
 * `GET /v1/images/tasks/{id}/events` and a submission's stream
 * (`Accept: text/event-stream`): each an SSE answer fed by the process's task
 * feed (see {@link runEventStream}). One timer for all of them writes the
 * keep-alive comments, so an open stream costs its socket, a set entry and
 * the feed's, and nothing while its task is quiet.
 */
export function createTaskEventStreams(deps: TaskEventStreamsDeps): TaskEventStreams {
  const streams = new OpenStreams(deps);
  return {
    watch: (req, res, principal, id, baseUrl) => watch(streams, req, res, principal, id, baseUrl),
    watchSubmitted: (res, principal, record, baseUrl, headers) =>
      watchSubmitted(streams, res, principal, record, baseUrl, headers),
    get size() {
      return streams.open.size;
    },
  };
}

/** {@link TaskEventStreams.watch}. */
async function watch(
  streams: OpenStreams,
  req: IncomingMessage,
  res: ServerResponse,
  principal: Principal,
  id: string,
  baseUrl: string,
): Promise<void> {
  const { deps } = streams;
  if (req.method === "HEAD") {
    await deps.read(principal, id);
    res.writeHead(200, EVENT_STREAM_HEADERS).end();
    return;
  }
  const lastId = req.headers["last-event-id"];
  await runEventStream({
    taskId: id,
    feed: deps.feed,
    read: () => deps.read(principal, id),
    after: parseEventId(Array.isArray(lastId) ? lastId[0] : lastId),
    sink: new EventStreamResponse(streams, res, baseUrl, {}),
    onLateError: streams.onLateError,
  });
}

/** {@link TaskEventStreams.watchSubmitted}. */
async function watchSubmitted(
  streams: OpenStreams,
  res: ServerResponse,
  principal: Principal,
  record: TaskRecord,
  baseUrl: string,
  headers: Record<string, string>,
): Promise<void> {
  const { deps } = streams;
  await runEventStream({
    taskId: record.id,
    feed: deps.feed,
    read: () => deps.read(principal, record.id),
    known: record,
    sink: new EventStreamResponse(streams, res, baseUrl, headers),
    onLateError: streams.onLateError,
  });
}
