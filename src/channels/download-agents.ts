import { Agent, type Dispatcher } from "undici";
import { createGuardedAgent } from "../net/create-guarded-agent.js";
import type { Channel } from "./channel.js";

/** Where the image URLs a channel's answers name are downloaded from. */
export interface DownloadAgents {
  /**
   * The keep-alive agent for `channel`'s image URLs, with its image timeout
   * (`imageTimeoutMs`) on the host's silence: for its own origin as the
   * operator configured it (`own`), or any other through the address guard.
   */
  agentOf(channel: Channel, own: boolean): Dispatcher;
  /** Closes every connection; downloads still running are cut. */
  close(): Promise<void>;
}

/**
 * Agents shared by every download, made on first use: a gateway that answers
 * with image URLs serves them from one host, and an agent of its own per
 * download opened a connection (a TLS handshake on https) for each image and
 * closed it at the image's end. One agent per image timeout and guard, not
 * per channel object: a forward key's copy of a channel lives for one
 * request, and its downloads share its gateway's connections.
 */
export function createDownloadAgents(): DownloadAgents {
  const agents = new Map<string, Dispatcher>();
  return {
    agentOf(channel, own) {
      const key = `${own ? "own" : "guarded"} ${channel.imageTimeoutMs}`;
      let agent = agents.get(key);
      if (!agent) {
        const timeouts = {
          headersTimeout: channel.imageTimeoutMs,
          bodyTimeout: channel.imageTimeoutMs,
        };
        agent = own ? new Agent(timeouts) : createGuardedAgent({ agent: timeouts });
        agents.set(key, agent);
      }
      return agent;
    },
    async close() {
      const open = [...agents.values()];
      agents.clear();
      await Promise.all(open.map((agent) => agent.destroy().catch(() => undefined)));
    },
  };
}
