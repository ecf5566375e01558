import type { Channel } from "./channel.js";

/**
 * Orders the channels that serve a model for one request: lowest `priority`
 * first, and inside one priority a weighted random order (each channel's
 * chance to go first is its share of the weights), so failover walks the
 * rest of the priority before dropping to the next.
 */
export function orderCandidates(
  channels: readonly Channel[],
  random: () => number = Math.random,
): Channel[] {
  // One channel (the common case) has one order: no draw, no sort.
  if (channels.length < 2) return channels.slice();
  // Efraimidis-Spirakis: sorting by u^(1/w) is a weighted sample without replacement.
  return channels
    .map((channel) => ({ channel, key: Math.pow(random(), 1 / channel.weight) }))
    .sort((a, b) => a.channel.priority - b.channel.priority || b.key - a.key)
    .map((entry) => entry.channel);
}
