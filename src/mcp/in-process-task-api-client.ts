import type { Principal } from "../auth/principal.js";
import { MAX_WAIT_SEC, isFinished } from "../contract/task-contract.js";
import { parseBody } from "../errors/parse-body.js";
import { ServiceError } from "../errors/service-error.js";
import type { Span } from "../tracing/tracer.js";
import type { ImageTasks } from "../tasks/create-image-tasks.js";
import type { TaskRecord } from "../tasks/core/task-record.js";
import { submitTaskSchema } from "../tasks/service/task-schemas.js";
import { presentTask, type PresentDeps } from "../tasks/view/present-task.js";
import type {
  DownloadedImage,
  ImageTask,
  ImageTaskApiClient,
  ImageTaskSnapshot,
  WatchTaskOptions,
} from "./client/image-task-api-client.js";
import { ImageTaskApiError, serviceRefusal } from "./client/image-task-api-error.js";

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
  /** The `/mcp` request's span: a task submitted through it starts its trace there. */
  span?: Span;
}

/**
 * The MCP tools' API client for `/mcp`: the task service called in process,
 * with the principal the request authenticated, rather than an HTTP round
 * trip to the service's own port: the same operations the HTTP lanes call
 * (submit, wait, watch, cancel), the same views. A refusal reads from its
 * error code, as the service raised it; `getTask`'s wait is the service's
 * own, woken by the task's end.
 */
export function createInProcessTaskApiClient(
  options: InProcessTaskApiClientOptions,
): ImageTaskApiClient {
  const o = options;
  return {
    baseUrl: `${o.publicOrigin}/v1`,
    submitTask: (body) => call(o, () => submitTask(o, body)),
    getTask: (taskId, signal, { waitSeconds = 0 } = {}) =>
      call(o, () => getTask(o, taskId, waitSeconds, signal)),
    cancelTask: (taskId) =>
      call(o, async () => view(o, await o.tasks.service.cancel(o.principal, taskId))),
    watchTask: (taskId, watch) => call(o, () => watchTask(o, taskId, watch)),
    downloadImage: (url) => downloadImage(o, url),
  };
}

/**
 * A task as the HTTP API shows it, without b64_json payloads: the tools over
 * HTTP hand out links, never base64.
 */
async function view(
  o: InProcessTaskApiClientOptions,
  record: TaskRecord,
  data: PresentDeps["data"] = "listed",
): Promise<ImageTask> {
  const { images } = o.tasks;
  return (await presentTask(record, { images, baseUrl: o.publicOrigin, data })) as ImageTask;
}

/** Runs `step`; the service's refusals become tool errors read from their codes. */
async function call<T>(o: InProcessTaskApiClientOptions, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    const retryAfter = Number(err.retryAfter);
    throw serviceRefusal(
      {
        code: err.code,
        message: err.message,
        retryAfterSec: Number.isFinite(retryAfter) ? retryAfter : undefined,
      },
      o.credentialHint,
    );
  }
}

/** {@link ImageTaskApiClient.submitTask}: the body parsed as the route parses it. */
async function submitTask(o: InProcessTaskApiClientOptions, body: unknown): Promise<ImageTask> {
  const request = parseBody(submitTaskSchema, body);
  const { record } = await o.tasks.service.submit(
    o.principal,
    { request },
    { baseUrl: o.publicOrigin, ...(o.span ? { span: o.span } : {}) },
  );
  return view(o, record, "none");
}

/** {@link ImageTaskApiClient.getTask}: the service's own wait (capped by the service). */
async function getTask(
  o: InProcessTaskApiClientOptions,
  taskId: string,
  waitSeconds: number,
  signal: AbortSignal | undefined,
): Promise<ImageTaskSnapshot> {
  const waitMs = Math.max(0, waitSeconds) * 1000;
  const record = await o.tasks.service.waitFor(o.principal, taskId, waitMs, signal);
  return {
    task: await view(o, record),
    retryAfterSeconds: isFinished(record.status) ? undefined : o.pollIntervalSec,
  };
}

/** {@link ImageTaskApiClient.watchTask}: the service's own watch, in process. */
async function watchTask(
  o: InProcessTaskApiClientOptions,
  taskId: string,
  { waitSeconds, signal, onEvent }: WatchTaskOptions,
): Promise<ImageTask | undefined> {
  const over = AbortSignal.timeout(Math.min(MAX_WAIT_SEC, Math.max(0, waitSeconds)) * 1000);
  let final: ImageTask | undefined;
  await o.tasks.service.watch(o.principal, taskId, {
    sink: {
      signal: signal ? AbortSignal.any([signal, over]) : over,
      open: () => undefined,
      end: () => undefined,
      noContent: () => undefined,
      async send(event, record) {
        const task = await view(o, record);
        onEvent({
          type: event.stage,
          task,
          ...(event.partialIndex === undefined ? {} : { partialImageIndex: event.partialIndex }),
        });
        if (event.position[0] === Infinity) final = task;
        return true;
      },
    },
  });
  return final;
}

/** {@link ImageTaskApiClient.downloadImage}: signed URLs of this service, read from its store. */
async function downloadImage(
  o: InProcessTaskApiClientOptions,
  url: string,
): Promise<DownloadedImage> {
  const { publicOrigin } = o;
  const { signer, images } = o.tasks;
  // As the files route would: the link's signature checked, the image read from the store.
  const target = new URL(url, `${publicOrigin}/`);
  const match = /^\/v1\/images\/files\/([^/]+)\/((\d{1,2})\.([a-z]{3,4}))$/.exec(target.pathname);
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
}
