import { ServiceError } from "./service-error.js";

/** An image store failure as clients see it: `storage_unavailable`, retry shortly. */
export function storageUnavailable(cause: unknown): ServiceError {
  return new ServiceError(
    "storage_unavailable",
    "The image store cannot be reached; retry shortly.",
    { retryAfter: 5, cause },
  );
}

/** Runs a step on the image store; its failure becomes {@link storageUnavailable}. */
export async function storage<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof ServiceError) throw err;
    throw storageUnavailable(err);
  }
}
