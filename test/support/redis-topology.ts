/**
 * Real Redis deployments started by tests: a Sentinel set (master, replicas,
 * sentinels) and a Redis Cluster, each on free ports of 127.0.0.1 with temp
 * dirs, killed by `stop()` (and, however the test process ends, by a
 * watchdog beside each redis-server).
 */
export {
  startSentinelSet,
  type SentinelSet,
  type SentinelSetOptions,
} from "./redis-topology/sentinel-set.js";
export {
  startRedisCluster,
  type ClusterNode,
  type KilledMaster,
  type RedisCluster,
  type RedisClusterOptions,
} from "./redis-topology/redis-cluster.js";
export { redisCommand, redisCommands, type RedisAddress } from "./redis-topology/resp-command.js";
export { pollUntil } from "./redis-topology/redis-process.js";
