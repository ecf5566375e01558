import { AppError } from "../../http/app-error.js";

/**
 * Runs a step on the store or the queue; their failure (Redis away, a disk
 * error) becomes 503 `store_unavailable`, never a 500 or a wrong 404.
 */
export async function available<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw new AppError("store_unavailable", "The task store cannot be reached; retry shortly.", {
      headers: { "Retry-After": "5" },
      cause: err,
    });
  }
}
