import type { Logger } from "pino";
import type { RedisTopology } from "../config/schema/redis-topology.js";
import type { RedisClient } from "./redis-client.js";
import { followPrimaries } from "./redis-topologies.js";

/** Which Redis node the service writes to, and when that last changed. */
export interface RedisPrimaryStatus {
  /** `standalone`, `sentinel` or `cluster`. */
  mode: RedisTopology["mode"];
  /** `host:port` of the primary (one server, the Sentinel set's master; a cluster's masters). */
  primary: string[];
  /** How many switches this process saw (a new master promoted, a cluster master replaced). */
  switches: number;
  /** When this process last saw one. */
  switchedAt: Date | undefined;
}

/** What {@link watchRedisPrimary} gives: the status now, and a call on each change. */
export interface RedisPrimaryWatch {
  status(): RedisPrimaryStatus;
  /** Calls `listener` whenever the primary changes (and once when it is first known). */
  onChange(listener: (status: RedisPrimaryStatus) => void): void;
}

/**
 * Follows the primary of `client`: on each connect (a Sentinel set's client
 * reconnects to the master the sentinels name) the address it connected
 * to; on a cluster, the masters after each refresh of the slot map. A new
 * address beside (or in place of) the ones seen before is a switch, logged.
 */
export function watchRedisPrimary(
  client: RedisClient,
  topology: RedisTopology,
  logger: Logger,
): RedisPrimaryWatch {
  let current: string[] = [];
  let switches = 0;
  let switchedAt: Date | undefined;
  const listeners: Array<(status: RedisPrimaryStatus) => void> = [];
  const status = (): RedisPrimaryStatus => ({
    mode: topology.mode,
    primary: current,
    switches,
    switchedAt,
  });
  const update = (seen: string[]) => {
    if (seen.length === 0 || same(seen, current)) return;
    const promoted = current.length > 0 && seen.some((address) => !current.includes(address));
    if (promoted) {
      switches += 1;
      switchedAt = new Date();
      logger.warn({ from: current, to: seen, mode: topology.mode }, "Redis primary switched");
    }
    current = seen;
    for (const listener of listeners) listener(status());
  };
  followPrimaries(client, update);
  return {
    status,
    onChange(listener) {
      listeners.push(listener);
      if (current.length > 0) listener(status());
    },
  };
}

function same(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((value, index) => value === b[index]);
}
