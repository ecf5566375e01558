import type { BackgroundCall } from "../../proxy/background-responses.js";
import type { TaskRecord } from "../core/task-record.js";
import type { BackgroundResponsesFeature } from "../create-image-tasks.js";
import { presentEvent } from "../responses/present-response.js";
import { EVENT_STREAM_HEADERS } from "./event-stream-response.js";
import { writeEvent } from "./send-presented.js";
import type { StreamSlots } from "./stream-slots.js";

/** Bytes a client may leave unread before its stream is cut (it is not reading). */
const MAX_UNREAD_BYTES = 64 * 1024 * 1024;

/** What a background response's event stream is served with. */
export interface ResponseStreamDeps {
  responses: BackgroundResponsesFeature;
  /** Streams open at once, per key and in all. */
  slots: StreamSlots;
  /** A comment line this often keeps a quiet stream open through proxies and CDNs. */
  keepAliveMs: number;
}

/**
 * Answers a background response's events after `after` as server-sent
 * events, as OpenAI streams them (`event: <type>`, `data:` the event with its
 * `sequence_number`), until its final event, the client leaving, or the
 * service stopping; a comment line keeps it open while the response is quiet.
 * A stream cut at any point resumes on any replica with
 * `GET /v1/responses/{id}?stream=true&starting_after=N`. `reserved`: the
 * stream's place, taken already (a submission's).
 */
export async function streamResponseEvents(
  deps: ResponseStreamDeps,
  call: BackgroundCall,
  record: TaskRecord,
  after: number,
  headers: Record<string, string> = {},
  reserved?: () => void,
): Promise<void> {
  const { res, principal } = call;
  const { service, imageStore } = deps.responses;
  const release = reserved ?? deps.slots.take(principal.subject);
  const gone = new AbortController();
  res.once("close", () => gone.abort());
  let writing = false;
  let ticker: NodeJS.Timeout | undefined;
  try {
    res.writeHead(200, { ...headers, ...EVENT_STREAM_HEADERS });
    // The headers go now: the client knows it is connected before the first event.
    res.flushHeaders();
    ticker = setInterval(() => {
      if (!writing && !res.writableEnded) res.write(": keep-alive\n\n");
    }, deps.keepAliveMs);
    ticker.unref();
    await service.follow(principal, record, {
      after,
      signal: gone.signal,
      async send(event) {
        if (gone.signal.aborted || res.writableEnded) return false;
        writing = true;
        try {
          await writeEvent(
            res,
            event.type,
            presentEvent(event, record.id, imageStore),
            gone.signal,
          );
        } finally {
          writing = false;
        }
        if (res.writableLength > MAX_UNREAD_BYTES) res.destroy();
        return !res.destroyed;
      },
    });
  } catch {
    // The headers are out: the stream ends here, and its client resumes where it stopped.
  } finally {
    clearInterval(ticker);
    release();
    if (!res.destroyed) res.end();
  }
}
