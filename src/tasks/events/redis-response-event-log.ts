import type { RedisClient } from "../../redis/redis-client.js";
import type { RedisResponseEventKeys } from "../../redis/redis-keys.js";
import { redisScript } from "../../redis/redis-script.js";
import type { LoggedEvent, ResponseEventLog } from "../core/response-state.js";
import { createAppendListeners } from "./local-append-listeners.js";

/**
 * KEYS: the response's log.
 * ARGV: most events kept, final ("1": taken even past the cap), TTL in ms, then the events.
 * Answers the sequence number of the first event appended, or -1 when the log is full.
 */
const APPEND = redisScript(`
local n = redis.call('LLEN', KEYS[1])
if ARGV[2] ~= '1' and n + #ARGV - 3 > tonumber(ARGV[1]) then return -1 end
for i = 4, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return n
`);

/** Options of {@link createRedisResponseEventLog}. */
export interface RedisEventLogOptions {
  client: RedisClient;
  keys: RedisResponseEventKeys;
  /** Events one response's log takes at most (a final event is taken even then). */
  maxEventsPerResponse: number;
  /** How long a log lives after its last append, unless `expire` sets it. */
  idleTtlMs: number;
}

/**
 * The event log of a deployment on Redis: one list per response
 * (`response-events:<id>`, one entry per event: its type, a newline, its
 * JSON), capped, with a TTL renewed by each append; its index is the event's
 * sequence number, so any replica reads from any point. A follower on
 * another replica than the run's sees new events within {@link pollMs}.
 */
export function createRedisResponseEventLog(options: RedisEventLogOptions): ResponseEventLog {
  const { client, keys } = options;
  const listeners = createAppendListeners();
  return {
    async append(id, events, appendOptions = {}) {
      const first = (await APPEND.run(
        client,
        [keys.log(id)],
        [
          options.maxEventsPerResponse,
          appendOptions.final ? "1" : "0",
          options.idleTtlMs,
          ...events.map((event) => `${event.type}\n${event.json}`),
        ],
      )) as number;
      listeners.notify(id);
      return first < 0 ? undefined : first;
    },
    async read(id, after, limit): Promise<LoggedEvent[]> {
      const from = Math.max(0, after + 1);
      const entries = await client.lrange(keys.log(id), from, from + limit - 1);
      return entries.map((entry, index) => {
        const cut = entry.indexOf("\n");
        return { seq: from + index, type: entry.slice(0, cut), json: entry.slice(cut + 1) };
      });
    },
    async expire(id, ttlMs) {
      await client.pexpire(keys.log(id), ttlMs);
    },
    async delete(id) {
      await client.del(keys.log(id));
    },
    onAppend: listeners.add,
    pollMs: 200,
  };
}
