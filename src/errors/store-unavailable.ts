import { ServiceError } from "./service-error.js";

/** A task store failure (Redis away, a disk error) as clients see it: retry shortly. */
export function storeUnavailable(cause: unknown): ServiceError {
  return new ServiceError("store_unavailable", "The task store cannot be reached; retry shortly.", {
    retryAfter: 5,
    cause,
  });
}

/**
 * Runs a step on the task store or the queue; their failure becomes
 * {@link storeUnavailable}, never a 500 or a wrong 404. A {@link ServiceError}
 * the step threw is the step's own answer and passes as it is.
 */
export async function available<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof ServiceError) throw err;
    throw storeUnavailable(err);
  }
}
