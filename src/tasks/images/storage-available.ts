import { AppError } from "../../http/app-error.js";

/** An image store failure as clients see it: 503 `storage_unavailable`, retry shortly. */
export function storageUnavailable(cause: unknown): AppError {
  return new AppError("storage_unavailable", "The image store cannot be reached; retry shortly.", {
    headers: { "Retry-After": "5" },
    cause,
  });
}

/** Runs a step on the image store; its failure becomes {@link storageUnavailable}. */
export async function storage<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw storageUnavailable(err);
  }
}
