import { OldestKeyCursor } from "../collections/oldest-key-cursor.js";

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

/** Bounds of {@link createClientCheckLimiter}: a {@link CheckLimits} per client address. */
export interface ClientCheckLimits extends CheckLimits {
  /** Client addresses remembered at once; past it the longest unused are forgotten. */
  maxClients: number;
}

/** A {@link CheckLimiter} per client address (its key, see `clientKeyOf`). */
export interface ClientCheckLimiter {
  tryAcquire(client: string): (() => void) | undefined;
  retryAfterSec(client: string): number;
}

/**
 * The checks of new keys one client address may start, so that one address
 * sending made-up keys uses up its own share, not the checks every new user
 * needs. Bounded memory: past `maxClients` addresses the least recently used
 * are forgotten (one that comes back starts with a full share, and the
 * bounds in all still hold).
 */
export function createClientCheckLimiter(limits: ClientCheckLimits): ClientCheckLimiter {
  const clients = new Map<string, CheckLimiter>();
  const leastRecent = new OldestKeyCursor(clients);
  const limiterOf = (client: string): CheckLimiter => {
    let limiter = clients.get(client);
    if (limiter) {
      // Most recently used last: a Map iterates in insertion order.
      clients.delete(client);
    } else {
      limiter = createCheckLimiter(limits);
    }
    clients.set(client, limiter);
    while (clients.size > limits.maxClients) leastRecent.evictOldest();
    return limiter;
  };
  return {
    tryAcquire: (client) => limiterOf(client).tryAcquire(),
    retryAfterSec: (client) => limiterOf(client).retryAfterSec(),
  };
}
