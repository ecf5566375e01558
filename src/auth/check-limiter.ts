/** Bounds of {@link createCheckLimiter}. */
export interface CheckLimits {
  /** Checks running at once. */
  maxConcurrent: number;
  /** Checks started per second, on average; a second's worth may start at once. */
  perSecond: number;
  now: () => number;
}

/** Admits gateway calls under both bounds, or refuses at once (nothing waits in line). */
export interface CheckLimiter {
  /** A release function when a check may start now, else `undefined`. */
  tryAcquire(): (() => void) | undefined;
  /** Whole seconds until a refused check could start, at least 1: the `Retry-After`. */
  retryAfterSec(): number;
}

/**
 * A token bucket (capacity and refill `perSecond`) and a count of checks in
 * flight: what forward mode spends on keys it has never seen, so that any
 * number of made-up keys costs the gateway at most `perSecond` calls a
 * second, `maxConcurrent` at a time. Refusing instead of queueing keeps a
 * flood from holding memory or connections while it waits.
 */
export function createCheckLimiter(limits: CheckLimits): CheckLimiter {
  const { maxConcurrent, perSecond, now } = limits;
  let tokens = perSecond;
  let refilledAt = now();
  let running = 0;

  const refill = () => {
    const at = now();
    tokens = Math.min(perSecond, tokens + ((at - refilledAt) / 1000) * perSecond);
    refilledAt = at;
  };

  return {
    tryAcquire() {
      refill();
      if (running >= maxConcurrent || tokens < 1) return undefined;
      tokens -= 1;
      running += 1;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        running -= 1;
      };
    },
    retryAfterSec() {
      refill();
      return Math.max(1, Math.ceil((1 - tokens) / perSecond));
    },
  };
}
