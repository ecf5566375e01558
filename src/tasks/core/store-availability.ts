import type { ServiceError } from "../../errors/service-error.js";

/**
 * What the submit path and the runs know of the stores every task needs,
 * without a call: the last checks' results (see `task-health.ts`), and where
 * to report a failure a real operation met, so that they are checked again
 * at once.
 */
export interface StoreAvailability {
  /** The 503 a submission gets while the task store or the image store is unavailable. */
  refusal(): ServiceError | undefined;
  /** Whether the image store worked at its last check. */
  imagesAvailable(): boolean;
  /** A task store operation failed. */
  storeFailed(): void;
  /** An image store operation failed. */
  imagesFailed(): void;
}

/** Availability that knows nothing: everything is available (tests that build parts alone). */
export const ALWAYS_AVAILABLE: StoreAvailability = {
  refusal: () => undefined,
  imagesAvailable: () => true,
  storeFailed: () => undefined,
  imagesFailed: () => undefined,
};
