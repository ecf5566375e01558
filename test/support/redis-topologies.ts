import { slow } from "./time-factor.js";
import { afterAll, beforeAll } from "vitest";
import {
  startRedisCluster,
  startSentinelSet,
  type RedisCluster,
  type SentinelSet,
} from "./redis-topology.js";

/** The password of the Redis servers (and cluster nodes) these topologies start. */
export const TOPOLOGY_PASSWORD = "topology-secret";

/** A Sentinel set and a Cluster, started once for a test file. */
export interface FileTopologies {
  /** `redis+sentinel://...` of the file's Sentinel set. */
  sentinelUrl(): string;
  /** `redis+cluster://...` of the file's cluster. */
  clusterUrl(): string;
}

/**
 * Starts a Sentinel set (master, replica, three sentinels) and a three-master
 * cluster (a replica each) once for the calling test file, in `beforeAll`,
 * side by side, and stops them after its tests. Call at a file's top level.
 */
export function useFileTopologies(): FileTopologies {
  let sentinel: SentinelSet | undefined;
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    const [set, nodes] = await Promise.allSettled([
      startSentinelSet({ password: TOPOLOGY_PASSWORD }),
      startRedisCluster({ password: TOPOLOGY_PASSWORD }),
    ]);
    if (set.status === "fulfilled") sentinel = set.value;
    if (nodes.status === "fulfilled") cluster = nodes.value;
    for (const started of [set, nodes]) if (started.status === "rejected") throw started.reason;
  }, slow(60_000));
  afterAll(async () => {
    await Promise.all([sentinel?.stop(), cluster?.stop()]);
  });
  const started = <T>(value: T | undefined): T => {
    if (!value) throw new Error("the file's Redis topologies did not start");
    return value;
  };
  return {
    sentinelUrl: () => started(sentinel).url,
    clusterUrl: () => started(cluster).url,
  };
}
