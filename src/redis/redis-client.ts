import type { Cluster, Redis } from "ioredis";

/**
 * The ioredis client every Redis user of the service shares (see
 * `openRedisClient`): one server or a Sentinel set's master (`Redis`), or a
 * Redis Cluster (`Cluster`); both take the same commands.
 */
export type RedisClient = Redis | Cluster;
