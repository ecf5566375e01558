import type { RedisClientType } from "@keyv/redis";

/** The node-redis client every Redis user of the service shares (see `openRedisClient`). */
export type RedisClient = RedisClientType;
