import { onTestFinished } from "vitest";
import type { Target } from "./task-api.js";

/** One server-sent event as a plain client parses it (WHATWG rules). */
export interface SseEvent {
  id?: string;
  event: string;
  data: string;
  /** `data` parsed as JSON (undefined when it is not JSON). */
  json: Record<string, unknown> & { id?: string; status?: string };
  /** `performance.now()` when it arrived. */
  at: number;
}

/** An open event stream: what arrived, and a way to wait for more. */
export interface SseStream {
  status: number;
  headers: Headers;
  /** The body as text when it was not an event stream (an error envelope). */
  text?: string;
  events: SseEvent[];
  /** Comment lines (keep-alives) seen so far. */
  comments: number;
  /** Resolves with event `index` (0-based) once it arrived; rejects after `timeoutMs`. */
  event(index: number, timeoutMs?: number): Promise<SseEvent>;
  /** Resolves when the server ended the stream. */
  ended: Promise<void>;
  /** Whether the server ended the stream. */
  readonly done: boolean;
  close(): void;
}

export interface OpenOptions {
  method?: "GET" | "POST";
  /** Bearer key; default the target's; null: none. */
  key?: string | null;
  headers?: Record<string, string>;
  json?: unknown;
  /** A multipart body (fetch sets its content type). */
  form?: FormData;
}

/**
 * Opens `path` as a plain SSE client would (fetch, `Accept: text/event-stream`),
 * parsing events as they arrive; closed when the test ends.
 */
export async function openEvents(
  target: Target,
  path: string,
  options: OpenOptions = {},
): Promise<SseStream> {
  const controller = new AbortController();
  onTestFinished(() => controller.abort());
  const key = options.key === undefined ? target.key : options.key;
  const headers: Record<string, string> = { accept: "text/event-stream", ...options.headers };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (options.json !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(`${target.url}${path}`, {
    method: options.method ?? (options.form || options.json !== undefined ? "POST" : "GET"),
    headers,
    body: options.form ?? (options.json === undefined ? undefined : JSON.stringify(options.json)),
    signal: controller.signal,
  });
  const events: SseEvent[] = [];
  const waiting = new Set<() => void>();
  let comments = 0;
  let done = false;
  const stream: SseStream = {
    status: response.status,
    headers: response.headers,
    events,
    get comments() {
      return comments;
    },
    get done() {
      return done;
    },
    ended: Promise.resolve(),
    event(index, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (events[index]) {
            clear();
            resolve(events[index]);
          } else if (done) {
            clear();
            reject(
              new Error(`the stream ended after ${events.length} events, before event ${index}`),
            );
          }
        };
        const timer = setTimeout(() => {
          clear();
          reject(new Error(`no event ${index} within ${timeoutMs} ms (got ${events.length})`));
        }, timeoutMs);
        const clear = () => {
          clearTimeout(timer);
          waiting.delete(check);
        };
        waiting.add(check);
        check();
      });
    },
    close: () => controller.abort(),
  };
  const notify = () => {
    for (const check of [...waiting]) check();
  };
  if (!response.headers.get("content-type")?.startsWith("text/event-stream")) {
    stream.text = await response.text();
    done = true;
    return stream;
  }
  stream.ended = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    let current: { id?: string; event?: string; data: string[] } = { data: [] };
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let newline: number;
        while ((newline = buffer.search(/\r\n|\r|\n/)) !== -1) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
          if (line === "") {
            if (current.data.length > 0) {
              const data = current.data.join("\n");
              let json: SseEvent["json"];
              try {
                json = JSON.parse(data) as SseEvent["json"];
              } catch {
                json = undefined as unknown as SseEvent["json"];
              }
              events.push({
                id: current.id,
                event: current.event ?? "message",
                data,
                json,
                at: performance.now(),
              });
              notify();
            }
            current = { data: [] };
          } else if (line.startsWith(":")) {
            comments += 1;
          } else {
            const colon = line.indexOf(":");
            const field = colon === -1 ? line : line.slice(0, colon);
            const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "data") current.data.push(value);
            else if (field === "event") current.event = value;
            else if (field === "id") current.id = value;
          }
        }
      }
    } catch {
      // aborted by the test
    } finally {
      done = true;
      notify();
    }
  })();
  return stream;
}
