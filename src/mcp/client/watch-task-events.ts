import { TASK_EVENT_STAGES, taskEventName } from "../../contract/task-contract.js";
import { parseEventStream } from "../../net/parse-event-stream.js";
import { imageTaskSchema, type ImageTask, type WatchTaskOptions } from "./image-task.js";
import { ImageTaskApiError } from "./image-task-api-error.js";
import { httpError, networkError, protocolError, readText } from "./image-task-api-http.js";

/** What {@link watchTaskEvents} calls the service with. */
export interface WatchContext {
  /** The service's `/v1` base URL. */
  baseUrl: string;
  fetch: typeof fetch;
  authorization?: string;
  credentialHint: string;
  /** How long an error answer may take to read. */
  requestTimeoutMs: number;
  /** Largest event (a task with its images). */
  maxEventBytes: number;
}

/**
 * `GET /v1/images/tasks/{id}/events` for up to `waitSeconds` (at most 60):
 * each event to `onEvent`, the finished task from the final event, or
 * undefined when the time ran out or the stream ended first. An error answer
 * rejects as the client's other calls do.
 */
export async function watchTaskEvents(
  context: WatchContext,
  taskId: string,
  { waitSeconds, signal, onEvent }: WatchTaskOptions,
): Promise<ImageTask | undefined> {
  const { baseUrl } = context;
  const over = AbortSignal.timeout(Math.min(60, Math.max(0, waitSeconds)) * 1000);
  const done = new AbortController();
  const stop = AbortSignal.any([over, done.signal, ...(signal ? [signal] : [])]);
  const headers: Record<string, string> = { accept: "text/event-stream" };
  if (context.authorization) headers.authorization = context.authorization;
  const url = `${baseUrl}/images/tasks/${encodeURIComponent(taskId)}/events`;
  try {
    const response = await context.fetch(url, { headers, signal: stop });
    if (!response.ok || !response.headers.get("content-type")?.startsWith("text/event-stream")) {
      const text = await readText(
        response,
        stop,
        context.requestTimeoutMs,
        baseUrl,
        context.maxEventBytes,
      );
      if (!response.ok) throw httpError(response, text, context.credentialHint);
      throw protocolError(response, "an answer that is not an event stream");
    }
    const body = response.body as unknown as AsyncIterable<Uint8Array>;
    for await (const event of parseEventStream(body, context.maxEventBytes)) {
      const type = TASK_EVENT_STAGES.find((stage) => event.event === taskEventName(stage));
      if (!type) continue;
      let json: unknown;
      try {
        json = JSON.parse(event.data);
      } catch {
        throw protocolError(response, "an event that is not JSON");
      }
      const task = imageTaskSchema.safeParse(json);
      if (!task.success) throw protocolError(response, "an event that is not an image task");
      const index = (json as { partial_image_index?: unknown }).partial_image_index;
      onEvent({
        type,
        task: task.data,
        ...(typeof index === "number" ? { partialImageIndex: index } : {}),
      });
      if (type === "completed" || type === "failed") return task.data;
    }
    return undefined;
  } catch (error) {
    if (over.aborted && !signal?.aborted) return undefined;
    if (error instanceof ImageTaskApiError) throw error;
    throw networkError(error, signal, over, waitSeconds * 1000, baseUrl);
  } finally {
    done.abort();
  }
}
