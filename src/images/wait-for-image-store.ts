import type { Logger } from "pino";
import { ConfigError } from "../config/config-error.js";
import type { ImageStore } from "./image-store.js";
import { ImageStoreError } from "./image-store-error.js";

/** Options of {@link waitForImageStore}. */
export interface WaitForImageStoreOptions {
  /** `images.connectTimeoutSec`, in milliseconds: how long a store that does not answer is waited for. */
  timeoutMs: number;
  /** Where the store is, for the line (`s3://bucket/prefix at http://host:9000`); no credentials. */
  where: string;
  logger: Logger;
}

/** Waits between checks of a store that did not answer. */
const RETRY_MS = 500;

/**
 * Start-up's check of the image store ({@link ImageStore.check}): a refusal
 * that cannot heal (no bucket, a refused key, no rights, a directory that
 * cannot be written) stops start-up at once; a store that does not answer is
 * checked again until `timeoutMs` has passed. Either way the failure is a
 * {@link ConfigError} of one line naming the field at fault and the store's
 * own code (the last one it gave: `timeout` only when no check got one), so
 * the CLI prints it and exits 2.
 */
export async function waitForImageStore(
  store: ImageStore,
  options: WaitForImageStoreOptions,
): Promise<void> {
  const { timeoutMs, where, logger } = options;
  const deadline = Date.now() + timeoutMs;
  let warned = false;
  // What the store last said when a check was not cut by the deadline: a last check that the
  // deadline cut (on a loaded machine, before its connection was even refused) says less.
  let answered: ImageStoreError | undefined;
  for (;;) {
    const left = deadline - Date.now();
    const signal = AbortSignal.timeout(Math.max(1, left));
    let failure: ImageStoreError;
    try {
      await store.check(signal);
      return;
    } catch (err) {
      failure = asStoreError(
        err,
        signal,
        store.backend === "s3" ? "images.s3.endpoint" : "images.url",
      );
    }
    if (failure.permanent) throw new ConfigError([lineOf(failure, where)]);
    if (signal.aborted) failure = answered ?? failure;
    else answered = failure;
    if (Date.now() + RETRY_MS >= deadline) {
      const waited = `did not answer within images.connectTimeoutSec (${Math.round(timeoutMs / 1000)} s)`;
      throw new ConfigError([
        `${failure.field}: the image store ${waited} (${failure.code}, on ${failure.operation}, ${where})`,
      ]);
    }
    if (!warned) {
      warned = true;
      logger.warn(
        { code: failure.code, operation: failure.operation },
        `the image store (${where}) does not answer yet; waiting up to images.connectTimeoutSec`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

/** The one line start-up prints for a refusal. */
export function lineOf(failure: ImageStoreError, where: string): string {
  return `${failure.field}: ${failure.reason} (${failure.code}, on ${failure.operation}, ${where})`;
}

/** A check's failure as an {@link ImageStoreError}; one cut by its deadline did not answer. */
function asStoreError(err: unknown, signal: AbortSignal, field: string): ImageStoreError {
  if (err instanceof ImageStoreError) return err;
  const code = signal.aborted ? "timeout" : ((err as { name?: string } | null)?.name ?? "error");
  return new ImageStoreError(code, false, field, "the image store did not answer", "check", {
    cause: err,
  });
}
