import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../../auth/principal.js";
import type { TaskRecord } from "../core/task-record.js";
import { parseEventId } from "../events/event-ids.js";
import { EVENT_STREAM_HEADERS, EventStreamResponse } from "./event-stream-response.js";
import { OpenStreams, type OpenStreamsDeps } from "./open-streams.js";
import type { TaskService } from "../service/task-service.js";
import { StreamSlots, type StreamLimits } from "./stream-slots.js";

/** Dependencies of {@link createTaskEventStreams}. */
export interface TaskEventStreamsDeps extends OpenStreamsDeps {
  /** The task service's watch: the owner check, then the task's events. */
  watch: TaskService["watch"];
  /** A task the principal owns, else 404 `task_not_found` (as `GET` reads it). */
  read: TaskService["get"];
  /** Streams open at once, per key and in all. */
  limits: StreamLimits;
}

/** The task event streams this process serves. */
export interface TaskEventStreams {
  /**
   * `GET /v1/images/tasks/{id}/events`, resuming after `Last-Event-ID`. A
   * task the principal cannot see rejects before anything is written or
   * followed; a key at its share of streams (or the process at its) rejects
   * with `too_many_event_streams`.
   */
  watch(
    req: IncomingMessage,
    res: ServerResponse,
    principal: Principal,
    id: string,
    baseUrl: string,
  ): Promise<void>;
  /**
   * A place for a submission's stream, taken before its task is created (a
   * refusal then leaves no task behind); returns its release.
   * @throws ServiceError `too_many_event_streams`
   */
  reserve(principal: Principal): () => void;
  /**
   * A submission's answer as a stream (its place reserved): the new task's
   * `queued` event (or, replayed, the events the task's state stands for),
   * then as `watch`.
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
 * `GET /v1/images/tasks/{id}/events` and a submission's stream
 * (`Accept: text/event-stream`): each an SSE answer to the task service's
 * watch, fed by the process's task feed. One timer for all of them writes the
 * keep-alive comments, so an open stream costs its socket, a set entry and
 * the feed's, and nothing while its task is quiet.
 */
export function createTaskEventStreams(deps: TaskEventStreamsDeps): TaskEventStreams {
  const streams = new OpenStreams(deps);
  const slots = new StreamSlots(deps.limits, (reason) =>
    deps.metrics.taskEventStreamsRefused.inc({ reason }),
  );
  return {
    watch: (req, res, principal, id, baseUrl) =>
      watch(deps, streams, slots, req, res, principal, id, baseUrl),
    reserve: (principal) => slots.take(principal.subject),
    watchSubmitted: (res, principal, record, baseUrl, headers) =>
      watchSubmitted(deps, streams, res, principal, record, baseUrl, headers),
    get size() {
      return streams.open.size;
    },
  };
}

/** {@link TaskEventStreams.watch}. */
async function watch(
  deps: TaskEventStreamsDeps,
  streams: OpenStreams,
  slots: StreamSlots,
  req: IncomingMessage,
  res: ServerResponse,
  principal: Principal,
  id: string,
  baseUrl: string,
): Promise<void> {
  // The owner check comes first: another key's request follows (subscribes to) nothing.
  const known = await deps.read(principal, id);
  if (req.method === "HEAD") {
    res.writeHead(200, EVENT_STREAM_HEADERS).end();
    return;
  }
  const release = slots.take(principal.subject);
  try {
    const lastId = req.headers["last-event-id"];
    const after = parseEventId(Array.isArray(lastId) ? lastId[0] : lastId);
    await deps.watch(principal, id, {
      known,
      ...(after ? { after } : {}),
      sink: new EventStreamResponse(streams, res, baseUrl, {}),
      onLateError: streams.onLateError,
    });
  } finally {
    release();
  }
}

/** {@link TaskEventStreams.watchSubmitted}. */
async function watchSubmitted(
  deps: TaskEventStreamsDeps,
  streams: OpenStreams,
  res: ServerResponse,
  principal: Principal,
  record: TaskRecord,
  baseUrl: string,
  headers: Record<string, string>,
): Promise<void> {
  await deps.watch(principal, record.id, {
    known: record,
    sink: new EventStreamResponse(streams, res, baseUrl, headers),
    onLateError: streams.onLateError,
  });
}
