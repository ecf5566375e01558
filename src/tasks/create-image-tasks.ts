import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { CredentialSealer } from "../auth/credential-sealer.js";
import type { Config } from "../config/config-schema.js";
import { createImageUrlSigner, type ImageUrlSigner } from "../files/image-url-signer.js";
import type { ImageStore } from "../images/image-store.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { ModelAccess } from "../models/model-access.js";
import { createTaskParts } from "./create-task-parts.js";
import type { TaskEventStreams } from "./events/task-event-streams.js";
import type { TaskFeed } from "./events/task-feed.js";
import { createImageReads, type ImageReads } from "./images/image-reads.js";
import { storageUnavailable } from "../errors/storage-unavailable.js";
import type { TaskBackend } from "./open-task-backend.js";
import { available } from "../errors/store-unavailable.js";
import type { TaskService } from "./service/task-service.js";
import { startImageTasks, stopImageTasks } from "./task-lifecycle.js";

/** Dependencies of {@link createImageTasks}. */
export interface ImageTasksDeps {
  config: Config;
  access: ModelAccess;
  /** Forward mode's sealer: forward keys' tasks keep their key sealed while unfinished. */
  sealer?: CredentialSealer;
  metrics: Metrics;
  logger: Logger;
  /** Where image bytes live (see `openImageStore`); opened and closed by the caller. */
  imageStore: ImageStore;
  /**
   * The task store, queue and bus `store.url` names (see `openTaskBackend`):
   * opened by the caller, which closes it when this rejects; once built,
   * {@link ImageTasks.stop} closes it, after the last request and task.
   */
  backend: TaskBackend;
  /** Milliseconds since the epoch; injectable for expiry tests. */
  now?: () => number;
}

/** The async image-task feature, as the rest of the service sees it. */
export interface ImageTasks {
  /** Submit, read, cancel. */
  service: TaskService;
  /** Signs and checks the URLs of `url` images (the secret is shared by every replica). */
  signer: ImageUrlSigner;
  /** Every task's events as this process hears them (from any replica), by task id. */
  feed: TaskFeed;
  /** Task event streams (`GET .../events`, submissions with `Accept: text/event-stream`). */
  eventStreams: TaskEventStreams;
  images: ImageReads;
  /**
   * Rejects when the task store (503 `store_unavailable`) or the image store
   * (503 `storage_unavailable`) cannot be reached (`/readyz`).
   */
  ping(): Promise<void>;
  /** Picks up what earlier processes left, starts running tasks and the periodic maintenance. */
  start(): Promise<void>;
  /**
   * Stops taking submissions and tasks, and answers waiting requests at once;
   * running tasks and webhook attempts get `graceMs`, then are handed back
   * (persistent store: to another replica or the next start) or fail
   * `interrupted` (memory store). Then closes the store, once `drained` (the
   * HTTP server's last requests) has settled too.
   */
  stop(graceMs: number, drained?: Promise<unknown>): Promise<void>;
}

/**
 * Builds the task feature on its opened backend: runner, finisher, service,
 * waiting requests, event streams, webhook deliveries and maintenance,
 * behind one entry (the parts in `create-task-parts.ts`, start and stop in
 * `task-lifecycle.ts`). Nothing runs until {@link ImageTasks.start}.
 */
export async function createImageTasks(deps: ImageTasksDeps): Promise<ImageTasks> {
  const { backend, imageStore } = deps;
  const signer = createImageUrlSigner(await signingSecret(deps.config, backend));
  const parts = createTaskParts(deps, backend, signer);
  const { store } = backend;
  return {
    service: parts.service,
    signer,
    feed: parts.feed,
    eventStreams: parts.eventStreams,
    images: createImageReads(store, parts.images),
    async ping() {
      await available(() => store.ping());
      await imageStore.ping().catch((err: unknown) => {
        throw storageUnavailable(err);
      });
    },
    start: () => startImageTasks(parts),
    stop: (graceMs, drained) => stopImageTasks(parts, graceMs, drained),
  };
}

/** The secret of image URLs: configured, else made once and kept in the store for every replica. */
async function signingSecret(config: Config, backend: TaskBackend): Promise<string> {
  return (
    config.server.urlSigningSecret ??
    (await backend.store.getOrSetMeta("url-signing-secret", () =>
      randomBytes(32).toString("base64url"),
    ))
  );
}
