import type { Metrics } from "./create-metrics.js";

/** Whose tokens these are, as `tokens_total`'s bounded labels name them. */
export interface TokenOwner {
  channel: string;
  /** A model a channel lists, else `other`. */
  model: string;
  /** The caller's group (a configured one, or `forward`). */
  group: string;
  /** A configured key's `key_name`; `other` for JWTs and forward keys (unbounded sets). */
  key: string;
}

/**
 * Counts a call's token usage in `tokens_total`, the same whatever made the
 * call: a passthrough answer, an image task's run, a background response.
 */
export function countTokens(
  metrics: Pick<Metrics, "tokenSeries">,
  owner: TokenOwner,
  usage: { input: number; output: number },
): void {
  const { channel, model, group, key } = owner;
  if (usage.input > 0)
    metrics.tokenSeries.get(channel, model, group, key, "input").inc(usage.input);
  if (usage.output > 0) {
    metrics.tokenSeries.get(channel, model, group, key, "output").inc(usage.output);
  }
}
