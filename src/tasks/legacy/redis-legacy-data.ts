import Keyv from "keyv";
import type { Redis } from "ioredis";
import type { RedisLegacyKeys, RedisStoreKeys } from "../../redis/redis-keys.js";
import { redisScript } from "../../redis/redis-script.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";
import { createKeyvCodec, type KeyvEntry } from "../store/keyv-codec.js";
import type { LegacyTask, LegacyTaskData } from "./legacy-task-data.js";

/** Image keys per task an earlier release wrote: `n` is at most 10. */
const MAX_IMAGES = 10;
/** Input keys per task: an edit takes at most 16 images and a mask. */
const MAX_INPUTS = 17;
/** Keys a SCAN call looks at. */
const SCAN_COUNT = 500;

/**
 * KEYS: the task, the index of image store keys by expiry, then the task's legacy byte keys.
 * ARGV: the record's rev read ("" to only delete the bytes), the new entry, the expiry score
 * ("" for an unfinished task), then the image store keys the record now holds.
 * 1 done, 0 the record changed since read.
 */
const SETTLE = redisScript(`
if ARGV[1] ~= '' then
  local raw = redis.call('GET', KEYS[1])
  if raw then
    if tostring(cjson.decode(raw).value.rev) ~= ARGV[1] then return 0 end
    redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
    if ARGV[3] ~= '' then
      for i = 4, #ARGV do redis.call('ZADD', KEYS[2], ARGV[3], ARGV[i]) end
    end
  end
end
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
return 1
`);

/** Options of {@link createRedisLegacyData}. */
export interface RedisLegacyDataOptions {
  /** One server or a Sentinel set's master (a cluster never held legacy data). */
  client: Redis;
  /** The records and indexes the bytes move beside (see `redis/redis-keys.ts`). */
  storeKeys: RedisStoreKeys;
  /** Where the bytes are. */
  legacyKeys: RedisLegacyKeys;
  now: () => number;
}

/**
 * {@link LegacyTaskData} on Redis: the `image:<id>:<n>` and `input:<id>:<n>`
 * entries earlier releases wrote beside the records, found with SCAN (only
 * they match), and the `meta:` entries. Any number of replicas may run it at
 * once: each settle is a compare-and-set on the record's `rev`.
 */
export function createRedisLegacyData(options: RedisLegacyDataOptions): LegacyTaskData {
  const { client, storeKeys, legacyKeys } = options;
  const codec = createKeyvCodec(new Keyv());
  const names = scanTaskIds(client, legacyKeys);
  const read = (id: string) => readTask(options, codec, id, options.now());
  return {
    async tasksWithBytes(limit) {
      const ids: string[] = [];
      while (ids.length < limit) {
        const next = await names.next();
        if (next.done) break;
        ids.push(next.value);
      }
      return Promise.all(ids.map(read));
    },
    async settle(task, record) {
      const entry = record && { value: { ...record, rev: Number(task.version) + 1 } };
      const { expires } = task as RedisLegacyTask;
      const expiresMs =
        record && isFinished(record.status)
          ? (expires ?? expiryOf(record, options.now))
          : undefined;
      const answer = await SETTLE.run(
        client,
        [storeKeys.task(task.id), storeKeys.expiringImages, ...byteKeys(legacyKeys, task.id)],
        [
          record ? task.version : "",
          entry ? codec.serialize({ ...entry, expires }) : "",
          expiresMs ?? "",
          ...(expiresMs === undefined || !record ? [] : keysOf(record)),
        ],
      );
      return answer === 1;
    },
    reload: read,
    async finish() {},
    async getMeta(key) {
      const text = await client.get(storeKeys.meta(key));
      return text === null ? undefined : (codec.deserialize<KeyvEntry>(text).value as string);
    },
    async deleteMeta(key) {
      await client.del(storeKeys.meta(key));
    },
  };
}

/** When a finished record expires, in ms, as the sweep orders image keys by it. */
function expiryOf(record: TaskRecord, now: () => number): number {
  return record.expires_at === undefined ? now() : record.expires_at * 1000;
}

function keysOf(record: TaskRecord): string[] {
  return [...(record.images ?? []), ...(record.inputs ?? [])].map((item) => item.key);
}

function byteKeys(keys: RedisLegacyKeys, id: string): string[] {
  return [
    ...Array.from({ length: MAX_IMAGES }, (_, index) => keys.bytes("image", id, index)),
    ...Array.from({ length: MAX_INPUTS }, (_, index) => keys.bytes("input", id, index)),
  ];
}

/** The ids of tasks with legacy byte keys, each once (SCAN may repeat a key). */
async function* scanTaskIds(client: Redis, legacyKeys: RedisLegacyKeys): AsyncGenerator<string> {
  const seen = new Set<string>();
  for (const kind of ["image", "input"] as const) {
    let cursor = "0";
    do {
      const [next, keys] = await client.scan(
        cursor,
        "MATCH",
        legacyKeys.bytesPattern(kind),
        "COUNT",
        SCAN_COUNT,
      );
      cursor = next;
      for (const key of keys) {
        const id = legacyKeys.taskOfBytes(key);
        if (id === undefined || seen.has(id)) continue;
        seen.add(id);
        yield id;
      }
    } while (cursor !== "0");
  }
}

type RedisLegacyTask = LegacyTask & { expires: number | undefined };

async function readTask(
  { client, storeKeys, legacyKeys }: RedisLegacyDataOptions,
  codec: ReturnType<typeof createKeyvCodec>,
  id: string,
  nowMs: number,
): Promise<RedisLegacyTask> {
  const keys = byteKeys(legacyKeys, id);
  const [recordText, ...byteTexts] = await client.mget([storeKeys.task(id), ...keys]);
  const entry = recordText ? codec.deserialize<KeyvEntry>(recordText) : undefined;
  const stored = entry?.value as (TaskRecord & { rev: number }) | undefined;
  const bytesAt = (from: number, count: number) => {
    const found = new Map<number, Buffer>();
    for (let index = 0; index < count; index += 1) {
      const text = byteTexts[from + index];
      if (!text) continue;
      const bytes = codec.deserialize<KeyvEntry>(text);
      const live = typeof bytes.expires !== "number" || bytes.expires > nowMs;
      if (live && typeof bytes.value === "string")
        found.set(index, Buffer.from(bytes.value, "base64"));
    }
    return found;
  };
  let record: TaskRecord | undefined;
  if (stored) {
    const { rev: _rev, ...rest } = stored;
    record = rest;
  }
  return {
    id,
    record,
    images: bytesAt(0, MAX_IMAGES),
    inputs: bytesAt(MAX_IMAGES, MAX_INPUTS),
    version: String(stored?.rev ?? ""),
    expires: typeof entry?.expires === "number" ? entry.expires : undefined,
  };
}
