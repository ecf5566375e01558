import { createHash } from "node:crypto";
import type { RedisClient } from "./redis-client.js";

/** A Lua script run by its SHA1 (EVALSHA), loaded on first use or after a Redis restart. */
export interface RedisScript {
  /**
   * Runs the script. Every key it touches is in `keys` (on a cluster they
   * must share one hash slot; see `docs/operations.md`, the key layout).
   */
  run(client: RedisClient, keys: string[], args: Array<string | number>): Promise<unknown>;
}

/** Wraps a Lua script: atomic steps the service needs that no single command gives. */
export function redisScript(lua: string): RedisScript {
  const sha = createHash("sha1").update(lua).digest("hex");
  return {
    async run(client, keys, args) {
      const argv = args.map(String);
      try {
        return await client.evalsha(sha, keys.length, ...keys, ...argv);
      } catch (err) {
        if (!String((err as Error).message).startsWith("NOSCRIPT")) throw err;
        return client.eval(lua, keys.length, ...keys, ...argv);
      }
    },
  };
}

/**
 * Runs a MULTI or pipeline and throws its first failed command's error
 * (ioredis answers each command's error in the result, not as a rejection).
 */
export async function execAll(batch: ReturnType<RedisClient["multi"]>): Promise<Array<unknown>> {
  const results = (await batch.exec()) ?? [];
  for (const [err] of results) if (err) throw err;
  return results.map(([, value]) => value);
}
