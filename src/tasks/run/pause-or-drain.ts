/** The longest delay a Node timer takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Waits `ms` between two polls: resolves `"time"` then, or `"drain"` as soon
 * as `draining` aborts (at once if it has); rejects with `signal`'s reason
 * as soon as it aborts.
 */
export function pauseOrDrain(
  ms: number,
  signal: AbortSignal,
  draining?: AbortSignal,
): Promise<"time" | "drain"> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    if (draining?.aborted) {
      resolve("drain");
      return;
    }
    const timer = setTimeout(() => done("time"), Math.min(Math.max(0, ms), MAX_TIMER_MS));
    const onAbort = () => {
      cleanUp();
      reject(signal.reason);
    };
    const onDrain = () => done("drain");
    function cleanUp() {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      draining?.removeEventListener("abort", onDrain);
    }
    function done(how: "time" | "drain") {
      cleanUp();
      resolve(how);
    }
    signal.addEventListener("abort", onAbort, { once: true });
    draining?.addEventListener("abort", onDrain, { once: true });
  });
}
