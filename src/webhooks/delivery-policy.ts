/**
 * How an attempt ended. A bounded set: metric labels use it as it is.
 * - `delivered`: the receiver answered 2xx;
 * - `http_error`: it answered something else (4xx, 5xx, 1xx);
 * - `redirect`: it answered 3xx, which is never followed;
 * - `timeout`: no status line within `webhooks.timeoutSec`;
 * - `network_error`: DNS failure, connection refused or reset, TLS error;
 * - `refused`: the address (or URL) is one webhooks may not reach, found when
 *   connecting (DNS rebinding), or no `webhooks.secret` is configured any more.
 */
export type AttemptOutcome =
  "delivered" | "http_error" | "redirect" | "timeout" | "network_error" | "refused";

/** Every {@link AttemptOutcome}, for metric label pre-registration and tests. */
export const ATTEMPT_OUTCOMES: readonly AttemptOutcome[] = [
  "delivered",
  "http_error",
  "redirect",
  "timeout",
  "network_error",
  "refused",
];

/**
 * How a delivery ended: delivered; `exhausted` after `maxAttempts` failed
 * attempts; `refused` at once, since retrying an address the policy refuses
 * would only refuse it again (and query the name's DNS once more).
 */
export type DeliveryResult = "delivered" | "exhausted" | "refused";

/** What a queue does after an attempt. */
export type NextStep =
  { action: "done"; result: DeliveryResult } | { action: "retry"; delayMs: number };

/** The part of the `webhooks` config the policy reads. */
export interface RetryPolicy {
  /** Attempts in all, the first included. */
  maxAttempts: number;
  /** Seconds to wait after the n-th failed attempt, n from 1; the last entry repeats. */
  retryScheduleSec: readonly number[];
}

/**
 * Seconds to wait after failed attempt number `failedAttempt` (1-based)
 * before the next one: the schedule's entry for it, or its last entry when
 * the schedule is shorter. With BullMQ, `failedAttempt` is `job.attemptsMade`
 * inside a custom `backoffStrategy`.
 */
export function retryDelaySec(failedAttempt: number, schedule: readonly number[]): number {
  const index = Math.min(Math.max(failedAttempt, 1), schedule.length) - 1;
  return schedule[index] ?? 0;
}

/**
 * What follows attempt number `attempt` (1-based) that ended with `outcome`:
 * any 2xx ends the delivery; a refused address ends it at once; anything else
 * (every other status, 3xx and 4xx included, as the spec and Svix do) is
 * retried after {@link retryDelaySec} until `maxAttempts` attempts were made.
 * Pure, so a queue backend can apply it as it is: BullMQ as a custom backoff
 * (and `UnrecoverableError` for `done`), the in-process queue as a timer.
 */
export function nextStep(outcome: AttemptOutcome, attempt: number, policy: RetryPolicy): NextStep {
  if (outcome === "delivered") return { action: "done", result: "delivered" };
  if (outcome === "refused") return { action: "done", result: "refused" };
  if (attempt >= policy.maxAttempts) return { action: "done", result: "exhausted" };
  return { action: "retry", delayMs: retryDelaySec(attempt, policy.retryScheduleSec) * 1000 };
}

/** The attempt outcome an HTTP status stands for. */
export function outcomeOfStatus(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return "delivered";
  if (status >= 300 && status < 400) return "redirect";
  return "http_error";
}
