/** Runs at most `max` functions at once; the others wait in order. */
export interface ConcurrencyLimit {
  /**
   * Runs `fn` once a slot is free. A `signal` that aborts while waiting takes
   * the call out of the line and rejects with the signal's reason.
   */
  run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T>;
  /** Functions running now. */
  readonly active: number;
  /** Functions waiting for a slot. */
  readonly waiting: number;
}

/** A FIFO semaphore of `max` slots. */
export function createConcurrencyLimit(max: number): ConcurrencyLimit {
  let active = 0;
  const line: Array<() => void> = [];

  const acquire = (signal?: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      signal?.throwIfAborted();
      if (active < max) {
        active += 1;
        return resolve();
      }
      const onAbort = () => {
        const at = line.indexOf(grant);
        if (at !== -1) line.splice(at, 1);
        reject(signal?.reason);
      };
      // The slot is handed over as it is: `active` stays the same.
      const grant = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      line.push(grant);
      signal?.addEventListener("abort", onAbort, { once: true });
    });

  const release = () => {
    const next = line.shift();
    if (next) next();
    else active -= 1;
  };

  return {
    async run(fn, signal) {
      await acquire(signal);
      try {
        return await fn();
      } finally {
        release();
      }
    },
    get active() {
      return active;
    },
    get waiting() {
      return line.length;
    },
  };
}
