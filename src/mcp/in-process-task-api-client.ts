import type { Principal } from "../auth/principal.js";
import { AppError } from "../http/app-error.js";
import { parseBody } from "../http/parse-body.js";
import type { ImageTasks } from "../tasks/create-image-tasks.js";
import { runEventStream } from "../tasks/events/task-event-stream.js";
import { presentTask, type PresentDeps } from "../tasks/present-task.js";
import { isFinished, type TaskRecord } from "../tasks/task-record.js";
import { MAX_WAIT_SEC } from "../tasks/task-query.js";
import { submitTaskSchema } from "../tasks/task-schemas.js";
import { apiError, type ImageTask, type ImageTaskApiClient } from "./image-task-api-client.js";
import { ImageTaskApiError } from "./image-task-api-error.js";

/** What {@link createInProcessTaskApiClient} needs. */
export interface InProcessTaskApiClientOptions {
  tasks: ImageTasks;
  /** The caller `/mcp` authenticated: its tasks, its models, its share. */
  principal: Principal;
  /** The origin the MCP client reached the service at: image links start with it. */
  publicOrigin: string;
  /** `Retry-After` of unfinished tasks (`imageTasks.pollIntervalSec`). */
  pollIntervalSec: number;
  /** Appended to 401 messages. */
  credentialHint: string;
}

/**
 * The MCP tools' API client for `/mcp`: the task service called in process,
 * with the principal the request authenticated, rather than an HTTP round
 * trip to the service's own port. Answers and errors are those of the HTTP
 * API (the same views, the same messages), so the tools cannot tell the two
 * apart; `getTask`'s wait is the service's own, woken by the task's end.
 */
export function createInProcessTaskApiClient(
  options: InProcessTaskApiClientOptions,
): ImageTaskApiClient {
  const { tasks, principal, publicOrigin } = options;
  const { service, signer, images } = tasks;
  // Without b64_json payloads: the tools over HTTP hand out links, never base64.
  const view = async (record: TaskRecord, data: PresentDeps["data"] = "listed") =>
    (await presentTask(record, { images, baseUrl: publicOrigin, data })) as ImageTask;
  /** The service's refusals as the HTTP client reports them. */
  const call = async <T>(step: () => Promise<T>): Promise<T> => {
    try {
      return await step();
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      throw apiError(
        {
          status: err.status,
          code: err.code,
          message: err.message,
          retryAfter: err.headers["Retry-After"],
        },
        options.credentialHint,
      );
    }
  };

  return {
    baseUrl: `${publicOrigin}/v1`,

    submitTask: (body) =>
      call(async () => {
        const request = parseBody(submitTaskSchema, body);
        const { record } = await service.submit(principal, { request }, { baseUrl: publicOrigin });
        return view(record, "none");
      }),

    getTask: (taskId, signal, { waitSeconds = 0 } = {}) =>
      call(async () => {
        const waitMs = Math.min(MAX_WAIT_SEC, Math.max(0, waitSeconds)) * 1000;
        const record = await service.waitFor(principal, taskId, waitMs, signal);
        return {
          task: await view(record),
          retryAfterSeconds: isFinished(record.status) ? undefined : options.pollIntervalSec,
        };
      }),

    cancelTask: (taskId) => call(async () => view(await service.cancel(principal, taskId))),

    // The service's own event stream, in process: the feed's events as they come.
    watchTask: (taskId, { waitSeconds, signal, onEvent }) =>
      call(async () => {
        const over = AbortSignal.timeout(Math.min(MAX_WAIT_SEC, Math.max(0, waitSeconds)) * 1000);
        let final: ImageTask | undefined;
        await runEventStream({
          taskId,
          feed: tasks.feed,
          read: () => service.get(principal, taskId),
          sink: {
            signal: signal ? AbortSignal.any([signal, over]) : over,
            open: () => undefined,
            end: () => undefined,
            noContent: () => undefined,
            async send(event, record) {
              const task = await view(record);
              onEvent({
                type: event.stage,
                task,
                ...(event.partialIndex === undefined
                  ? {}
                  : { partialImageIndex: event.partialIndex }),
              });
              if (event.position[0] === Infinity) final = task;
              return true;
            },
          },
        });
        return final;
      }),

    async downloadImage(url) {
      // Signed URLs of this service, read from its store as the files route would.
      const target = new URL(url, `${publicOrigin}/`);
      const match = /^\/v1\/images\/files\/([^/]+)\/((\d{1,2})\.([a-z]{3,4}))$/.exec(
        target.pathname,
      );
      const expires = target.searchParams.get("expires") ?? "";
      const signature = target.searchParams.get("signature") ?? "";
      const nowSec = Math.floor(Date.now() / 1000);
      const image =
        target.origin === publicOrigin &&
        match &&
        signer.verify(match[1]!, match[2]!, expires, signature, nowSec)
          ? await images.openCompleted(match[1]!, Number(match[3]), match[4]!)
          : undefined;
      if (!image) {
        throw new ImageTaskApiError("refused", "The image does not exist or its link has expired.");
      }
      const chunks: Buffer[] = [];
      for await (const chunk of image.body) chunks.push(chunk as Buffer);
      return { bytes: Buffer.concat(chunks), contentType: image.contentType };
    },
  };
}
