import { Redis } from "ioredis";
import { describe, expect, it, onTestFinished } from "vitest";
import type { ResponseEventLog } from "../../src/tasks/core/response-state.js";
import { createMemoryResponseEventLog } from "../../src/tasks/events/memory-response-event-log.js";
import { createRedisResponseEventLog } from "../../src/tasks/events/redis-response-event-log.js";
import { redisKeys } from "../../src/redis/redis-keys.js";
import { REDIS_URL, deleteKeys, listKeys, uniquePrefix } from "../support/redis.js";

const event = (n: number) => ({ type: "response.output_text.delta", json: `{"delta":"${n}"}` });

/** The log of each backend kind, with at most 5 events a response. */
const kinds: Array<[string, () => Promise<{ log: ResponseEventLog; prefix?: string }>]> = [
  [
    "in the process (memory, SQLite)",
    async () => ({
      log: createMemoryResponseEventLog({
        maxEventsPerResponse: 5,
        maxTotalChars: 1_000_000,
        idleTtlMs: 60_000,
      }),
    }),
  ],
  [
    "on Redis",
    async () => {
      const prefix = uniquePrefix("events");
      const client = new Redis(REDIS_URL);
      onTestFinished(async () => {
        client.disconnect();
        await deleteKeys(prefix);
      });
      const keys = redisKeys(prefix, { mode: "standalone", url: REDIS_URL, tls: false });
      return {
        prefix,
        log: createRedisResponseEventLog({
          client,
          keys: keys.responseEvents,
          maxEventsPerResponse: 5,
          idleTtlMs: 60_000,
        }),
      };
    },
  ],
];

describe.each(kinds)("the response event log %s", (_name, open) => {
  it("numbers events by their place, reads from any point, and wakes this process's followers", async () => {
    const { log } = await open();
    let woken = 0;
    const stop = log.onAppend("resp_a", () => (woken += 1));
    expect(await log.append("resp_a", [event(0), event(1)])).toBe(0);
    expect(await log.append("resp_a", [event(2)])).toBe(2);
    stop();
    await log.append("resp_a", [event(3)]);
    expect(woken).toBe(2);
    expect(await log.read("resp_a", -1, 10)).toEqual(
      [0, 1, 2, 3].map((n) => ({ seq: n, ...event(n) })),
    );
    expect((await log.read("resp_a", 1, 1)).map((entry) => entry.seq)).toEqual([2]);
    expect(await log.read("resp_a", 3, 10)).toEqual([]);
    expect(await log.read("resp_other", -1, 10)).toEqual([]);
  });

  it("is capped, but always takes a final event, and goes when it expires or is deleted", async () => {
    const { log } = await open();
    expect(await log.append("resp_b", [0, 1, 2, 3].map(event))).toBe(0);
    expect(await log.append("resp_b", [event(4), event(5)])).toBeUndefined();
    expect(await log.append("resp_b", [event(4)])).toBe(4);
    expect(await log.append("resp_b", [event(5)])).toBeUndefined();
    const final = { type: "response.completed", json: "{}" };
    expect(await log.append("resp_b", [final], { final: true })).toBe(5);
    expect((await log.read("resp_b", 4, 10)).map((entry) => entry.type)).toEqual([
      "response.completed",
    ]);
    await log.expire("resp_b", 50);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await log.read("resp_b", -1, 10)).toEqual([]);
    await log.append("resp_c", [event(0)]);
    await log.delete("resp_c");
    expect(await log.read("resp_c", -1, 10)).toEqual([]);
  });
});

describe("the Redis key of a response's events", () => {
  it("is `<prefix>::response-events:<id>`, with a TTL", async () => {
    const prefix = uniquePrefix("events");
    const keys = redisKeys(prefix, { mode: "standalone", url: REDIS_URL, tls: false });
    expect(keys.responseEvents.log("resp_1")).toBe(`${prefix}::response-events:resp_1`);
    expect(
      redisKeys("sidecar", { mode: "cluster", nodes: [], tls: false }).responseEvents.log("r"),
    ).toBe("{sidecar}::response-events:r");
    const client = new Redis(REDIS_URL);
    onTestFinished(async () => {
      client.disconnect();
      await deleteKeys(prefix);
    });
    const log = createRedisResponseEventLog({
      client,
      keys: keys.responseEvents,
      maxEventsPerResponse: 10,
      idleTtlMs: 60_000,
    });
    await log.append("resp_1", [event(0)]);
    expect(await listKeys(prefix)).toEqual([`${prefix}::response-events:resp_1`]);
    const ttl = await client.pttl(`${prefix}::response-events:resp_1`);
    expect(ttl).toBeGreaterThan(50_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });
});

describe("the in-process log's size bound", () => {
  it("drops the oldest logs first, never the one being written", async () => {
    const log = createMemoryResponseEventLog({
      maxEventsPerResponse: 100,
      maxTotalChars: 200,
      idleTtlMs: 60_000,
    });
    const big = { type: "t", json: "x".repeat(90) };
    await log.append("old", [big]);
    await log.append("new", [big]);
    await log.append("newest", [big, big, big]);
    expect(await log.read("old", -1, 10)).toEqual([]);
    expect(await log.read("new", -1, 10)).toEqual([]);
    expect(await log.read("newest", -1, 10)).toHaveLength(3);
  });
});
