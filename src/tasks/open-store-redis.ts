import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import type { RedisTopology } from "../config/schema/redis-topology.js";
import { openRedisClient, type OpenedRedis } from "../redis/open-redis-client.js";

/**
 * The Redis client of a Redis task store (`store.url`), with the store's
 * connect and command deadlines and its sentinel password.
 */
export function openStoreRedis(
  config: Pick<Config, "store">,
  target: { url: string; topology: RedisTopology },
  logger: Logger,
): Promise<OpenedRedis> {
  return openRedisClient({
    url: target.url,
    topology: target.topology,
    sentinelPassword: config.store.sentinelPassword,
    logger,
    connectTimeoutMs: config.store.connectTimeoutSec * 1000,
    commandTimeoutMs: config.store.commandTimeoutSec * 1000,
  });
}
