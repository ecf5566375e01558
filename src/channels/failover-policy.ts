/**
 * How far one try of a call got:
 * `connecting` (no connection yet), `sending` (connected, a streamed body
 * still going out), `sent` (the whole request handed to the connection),
 * `answered` (status and headers in; the caller decides what to read),
 * `streaming` (the body flowing to its reader), `done` (ended, whole or not).
 */
export type TryStage = "connecting" | "sending" | "sent" | "answered" | "streaming" | "done";

/**
 * Statuses by which a channel refuses a request without running it: rate
 * limited, down or failing (5xx), or not taking the key it was sent
 * (401/403). Any other answer is the channel's own and goes to the caller.
 */
function refusedByStatus(status: number): boolean {
  return status === 429 || status >= 500 || status === 401 || status === 403;
}

/**
 * The one failover rule: a call moves on to the next channel only when the
 * channel before provably did not run it (it could not run, and so cannot
 * bill, a request it never got whole), and the body can be sent again.
 *
 * - a try that failed while `connecting` or `sending` (refused, reset or
 *   silent before the whole request went out);
 * - an answer with a {@link refusedByStatus} status, before any of it was
 *   passed on (the client only ever sees the answer that ends the call).
 *
 * A try that failed after the whole request went out (a reset, a timeout, a
 * broken answer) ends the call: that channel may be running it.
 */
export function mayTryNext(
  outcome: { stage: TryStage } | { status: number },
  canResend: boolean,
): boolean {
  if (!canResend) return false;
  if ("status" in outcome) return refusedByStatus(outcome.status);
  return outcome.stage === "connecting" || outcome.stage === "sending";
}
