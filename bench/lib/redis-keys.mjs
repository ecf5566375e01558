// The bench's own keys on the shared Redis: each run writes under a prefix of its own and
// deletes it afterwards (SCAN + UNLINK), and measures what a prefix holds.
import { createClient } from "@keyv/redis";

export const REDIS_URL = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379/0";

async function withClient(fn) {
  const client = createClient({
    url: REDIS_URL,
    socket: { connectTimeout: 2000, reconnectStrategy: false },
  });
  client.on("error", () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    client.destroy();
  }
}

/** True when a Redis answers PING at REDIS_URL within 2 s. */
export async function redisAvailable() {
  try {
    return (await withClient((client) => client.ping())) === "PONG";
  } catch {
    return false;
  }
}

async function keysOf(client, prefix) {
  const found = [];
  for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 1000 })) {
    found.push(...keys);
  }
  return found;
}

/** UNLINKs every key under `prefix`; resolves how many. */
export function deletePrefix(prefix) {
  return withClient(async (client) => {
    const keys = await keysOf(client, prefix);
    for (let i = 0; i < keys.length; i += 500) await client.unlink(keys.slice(i, i + 500));
    return keys.length;
  });
}

/** Keys under `prefix` and the sum of their `MEMORY USAGE` (bytes). */
export function prefixMemory(prefix) {
  return withClient(async (client) => {
    const keys = await keysOf(client, prefix);
    let bytes = 0;
    for (let i = 0; i < keys.length; i += 500) {
      const sizes = await Promise.all(keys.slice(i, i + 500).map((key) => client.memoryUsage(key)));
      bytes += sizes.reduce((sum, size) => sum + (size ?? 0), 0);
    }
    return { keys: keys.length, bytes };
  });
}

/** `INFO memory` used_memory, in bytes. */
export function usedMemory() {
  return withClient(async (client) => {
    const info = await client.info("memory");
    return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? NaN);
  });
}
