import { createHash } from "node:crypto";
import type { RedisClient } from "./open-redis-client.js";

/** A Lua script run by its SHA1 (EVALSHA), loaded on first use or after a Redis restart. */
export interface RedisScript {
  run(client: RedisClient, keys: string[], args: Array<string | number>): Promise<unknown>;
}

/** Wraps a Lua script: atomic steps the service needs that no single command gives. */
export function redisScript(lua: string): RedisScript {
  const sha = createHash("sha1").update(lua).digest("hex");
  return {
    async run(client, keys, args) {
      const options = { keys, arguments: args.map(String) };
      try {
        return await client.evalSha(sha, options);
      } catch (err) {
        if (!String((err as Error).message).startsWith("NOSCRIPT")) throw err;
        return client.eval(lua, options);
      }
    },
  };
}
