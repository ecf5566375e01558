import type { Logger } from "pino";
import { ServiceError } from "../errors/service-error.js";
import { createPartHealth, type PartHealth, type PartStatus } from "../health/part-health.js";
import type { ImageStore } from "../images/image-store.js";
import { ImageStoreError } from "../images/image-store-error.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { StoreAvailability } from "./core/store-availability.js";
import type { TaskStore } from "./core/task-store.js";

/** How often the task store is checked while it works, and either store while it does not. */
const CHECK_EVERY_MS = 15_000;
const RECHECK_EVERY_MS = 2_000;
/** Longest one check may take: past it the store counts as not answering. */
const CHECK_TIMEOUT_MS = 5_000;
/** What a client is told to wait before submitting again. */
const RETRY_AFTER_SEC = 5;

/** Dependencies of {@link createTaskHealth}. */
export interface TaskHealthDeps {
  store: Pick<TaskStore, "ping">;
  imageStore: Pick<ImageStore, "check">;
  metrics: Pick<Metrics, "storeUp">;
  logger: Logger;
  /** How often the image store is checked while it works (`images.checkIntervalSec`). Default 15 s. */
  imageCheckIntervalMs?: number;
}

/**
 * Whether the parts every task needs work now: the task store and the image
 * store. Start-up checked both; the task store is then checked every 15 s,
 * the image store every `images.checkIntervalSec` (an S3 check is four
 * requests), each every 2 s while it fails, and at once when a real operation
 * on it fails (an image store check that misses its 5 s deadline counts only
 * when the next misses too: see `confirmMissedDeadline`). `/readyz` and
 * submissions only read the result, so a task that could not be kept is never
 * sent to a channel, and no unauthenticated caller makes a store do any work.
 */
export interface TaskHealth extends StoreAvailability {
  store: PartHealth;
  images: PartHealth;
  start(): void;
  stop(): void;
}

/** Builds the two checks; they run once {@link TaskHealth.start} is called. */
export function createTaskHealth(deps: TaskHealthDeps): TaskHealth {
  const { metrics, logger } = deps;
  const watch =
    (name: "tasks" | "images", what: string) =>
    (status: PartStatus, previous: PartStatus | undefined) => {
      metrics.storeUp.set({ store: name }, status === "ok" ? 1 : 0);
      if (status !== "ok") logger.warn({ store: name, reason: status }, `${what} is unavailable`);
      else if (previous !== undefined) logger.info({ store: name }, `${what} is available again`);
    };
  const common = { retryMs: RECHECK_EVERY_MS, timeoutMs: CHECK_TIMEOUT_MS };
  const store = createPartHealth({
    ...common,
    intervalMs: CHECK_EVERY_MS,
    probe: () => deps.store.ping(),
    reasonOf: storeReason,
    onChange: watch("tasks", "the task store"),
    initial: "ok",
  });
  const images = createPartHealth({
    ...common,
    intervalMs: deps.imageCheckIntervalMs ?? CHECK_EVERY_MS,
    probe: (signal) => deps.imageStore.check(signal),
    reasonOf: imageStoreReason,
    onChange: watch("images", "the image store"),
    confirmMissedDeadline: true,
    initial: "ok",
  });
  metrics.storeUp.set({ store: "tasks" }, 1);
  metrics.storeUp.set({ store: "images" }, 1);
  return {
    store,
    images,
    refusal() {
      // The reason stays with the operator (`/readyz`, the logs): clients learn which store.
      if (!store.available()) {
        return new ServiceError(
          "store_unavailable",
          "The task store is unavailable; retry shortly.",
          { retryAfter: RETRY_AFTER_SEC },
        );
      }
      if (!images.available()) {
        return new ServiceError(
          "storage_unavailable",
          "The image store is unavailable, so no task can be kept; retry shortly.",
          { retryAfter: RETRY_AFTER_SEC },
        );
      }
      return undefined;
    },
    imagesAvailable: () => images.available(),
    storeFailed: () => store.failed(),
    imagesFailed: () => images.failed(),
    start() {
      store.start();
      images.start();
    },
    stop() {
      store.stop();
      images.stop();
    },
  };
}

/**
 * Why the task store failed, without its message (a Redis error can quote
 * its URL): the error's code, else its kind.
 */
function storeReason(err: unknown): string {
  const { code, name } = (err ?? {}) as { code?: unknown; name?: unknown };
  const shown = typeof code === "string" && /^[A-Za-z0-9_]{2,40}$/.test(code) ? code : name;
  return `the task store cannot be reached${typeof shown === "string" ? ` (${shown})` : ""}`;
}

/** Why the image store failed: what it means and the store's own code. */
export function imageStoreReason(err: unknown): string {
  if (err instanceof ImageStoreError) return `${err.reason} (${err.code}, on ${err.operation})`;
  return "the image store did not answer";
}
