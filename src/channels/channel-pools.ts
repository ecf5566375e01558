import { Pool } from "undici";
import type { Channel } from "./channel.js";

/** Longest wait for a connection to a channel; a dead address then goes to the next channel. */
const CONNECT_TIMEOUT_MS = 10_000;

/** Where the calls to one channel base URL go. */
export interface ChannelTarget {
  /** The base URL's path (`/v1`, `/openai/v1`), no trailing slash: every path goes after it. */
  prefix: string;
  /** Keep-alive connections, for bodies that can be sent again. */
  pooled: Pool;
  /**
   * A new connection per call, closed after it: for bodies streamed from a
   * client, which cannot go out twice. A pooled connection the channel closed
   * meanwhile would fail half-way through one, too late for another channel.
   */
  fresh: Pool;
}

/** The connection pools of the channels called, by base URL (a forward key's copy shares its gateway's). */
export interface ChannelPools {
  targetOf(channel: Channel): ChannelTarget;
  /** Closes every connection; calls still running are cut. */
  close(): Promise<void>;
}

/**
 * undici pools, one pair per channel origin and path. The channel's own
 * timeouts are set per call (`headersTimeout`/`bodyTimeout`), which undici
 * counts only while it waits on the channel: not while a request body is
 * still coming from its client, not while the reader holds the answer back.
 * Idle connections are closed before the channel's announced `Keep-Alive`
 * timeout (4 s without one), so a request is not written into a connection
 * the channel is closing.
 */
export function createChannelPools(): ChannelPools {
  const targets = new Map<string, ChannelTarget>();
  return {
    targetOf(channel) {
      let target = targets.get(channel.baseUrl);
      if (target) return target;
      const url = new URL(channel.baseUrl);
      const options = {
        connect: { timeout: Math.min(CONNECT_TIMEOUT_MS, channel.timeoutMs) },
        headersTimeout: channel.timeoutMs,
        bodyTimeout: channel.timeoutMs,
      };
      target = {
        prefix: url.pathname.replace(/\/+$/, ""),
        pooled: new Pool(url.origin, options),
        fresh: new Pool(url.origin, { ...options, pipelining: 0 }),
      };
      targets.set(channel.baseUrl, target);
      return target;
    },
    async close() {
      const all = [...targets.values()].flatMap((target) => [target.pooled, target.fresh]);
      targets.clear();
      await Promise.all(all.map((pool) => pool.destroy()));
    },
  };
}
