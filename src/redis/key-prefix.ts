import type { RedisTopology } from "../config/schema/redis-topology.js";

/**
 * The start of every key a deployment writes: `store.prefix` as it is on one
 * server or a Sentinel set (the layout earlier releases wrote), and in a hash
 * tag (`{image-task-sidecar}`) on a Redis Cluster, so that every key of the
 * deployment (records, indexes, the queues) sits in one hash slot and each
 * script and transaction touches one slot. A prefix that holds a tag already
 * is kept as it is.
 */
export function redisKeyPrefix(prefix: string, topology: RedisTopology): string {
  if (topology.mode !== "cluster" || /\{[^}]+\}/.test(prefix)) return prefix;
  return `{${prefix}}`;
}
