/**
 * `step`, or a rejection with the signal's reason as soon as `signal` aborts:
 * an image store that hangs does not hold a run past its timeout or cancel.
 */
export function untilAborted<T>(step: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise((resolve, reject) => {
    const aborted = () => reject(signal.reason as Error);
    signal.addEventListener("abort", aborted, { once: true });
    step.then(
      (value) => {
        signal.removeEventListener("abort", aborted);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", aborted);
        reject(err as Error);
      },
    );
  });
}
