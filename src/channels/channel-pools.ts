import { Pool } from "undici";
import type { Channel } from "./channel.js";

/** Longest wait for a connection to a channel; a dead address then goes to the next channel. */
const CONNECT_TIMEOUT_MS = 10_000;

/** Where the calls to one channel base URL go. */
export interface ChannelTarget {
  /** The base URL's path (`/v1`, `/openai/v1`), no trailing slash: every path goes after it. */
  prefix: string;
  /** Its keep-alive connections. */
  pool: Pool;
}

/** The connection pools of the channels called, by base URL (a forward key's copy shares its gateway's). */
export interface ChannelPools {
  targetOf(channel: Channel): ChannelTarget;
  /** Closes every connection; calls still running are cut. */
  close(): Promise<void>;
}

/**
 * undici pools, one per channel base URL. The channel's own timeouts are set
 * per call (`headersTimeout`/`bodyTimeout`), which undici counts only while it
 * waits on the channel: not while a request body is still coming from its
 * client, not while the reader holds the answer back.
 *
 * Every call, a streamed form's too, takes a pooled connection. undici never
 * writes into a connection it saw the channel close, waits a turn of the event
 * loop before reusing one, and closes idle ones before the channel's announced
 * `Keep-Alive` timeout (4 s without one): a form cut by a close that crossed
 * it on the wire is a 502, never a request run twice. A connection of its own
 * per form cost a third or more of its CPU (connect, close) in the bench.
 */
export function createChannelPools(): ChannelPools {
  const targets = new Map<string, ChannelTarget>();
  return {
    targetOf(channel) {
      let target = targets.get(channel.baseUrl);
      if (target) return target;
      const url = new URL(channel.baseUrl);
      target = {
        prefix: url.pathname.replace(/\/+$/, ""),
        // Every dispatch sets its own idle timeouts; only connecting is the pool's (the first
        // channel on this base URL sets it).
        pool: new Pool(url.origin, {
          connect: { timeout: Math.min(CONNECT_TIMEOUT_MS, channel.timeoutMs) },
        }),
      };
      targets.set(channel.baseUrl, target);
      return target;
    },
    async close() {
      const pools = [...targets.values()].map((target) => target.pool);
      targets.clear();
      await Promise.all(pools.map((pool) => pool.destroy()));
    },
  };
}
