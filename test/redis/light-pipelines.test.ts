import { describe, expect, it, onTestFinished } from "vitest";
import { createRedisClient } from "../../src/redis/redis-topologies.js";
import type { RedisClient } from "../../src/redis/redis-client.js";
import { REDIS_URL, deleteKeys, uniquePrefix } from "../support/redis.js";

/*
 * The service's clients make their pipelines (one per auto-pipelined batch)
 * without copying the scripts defined on them (redis/light-pipelines.ts):
 * each defined command must still run, in a pipeline made by hand and in an
 * auto-pipelined batch, including one defined after pipelines were made.
 */

async function openClient(): Promise<{ client: RedisClient; key: (name: string) => string }> {
  const prefix = uniquePrefix("light-pipelines");
  const client = createRedisClient({ mode: "standalone", url: REDIS_URL, tls: false });
  await client.connect();
  onTestFinished(async () => {
    client.disconnect();
    await deleteKeys(prefix);
  });
  return { client, key: (name) => `${prefix}::${name}` };
}

type Scripted = Record<string, (...args: unknown[]) => Promise<unknown>>;
/** The pipeline's commands this file chains, defined ones too. */
interface ScriptedPipeline {
  set(key: string, value: string): ScriptedPipeline;
  get(key: string): ScriptedPipeline;
  say7(key: string, word: string): ScriptedPipeline;
  say39Buffer(key: string, word: string): ScriptedPipeline;
  incrTwice(key: string): ScriptedPipeline;
  exec(): Promise<unknown>;
}

const define = (client: RedisClient, name: string, lua: string) =>
  client.defineCommand(name, { numberOfKeys: 1, lua });

describe("light pipelines", () => {
  it("copy no defined command onto a pipeline, and run each through it", async () => {
    const { client, key } = await openClient();
    for (let at = 0; at < 40; at += 1) define(client, `say${at}`, `return ARGV[1] .. ${at}`);
    define(client, "incrTwice", "redis.call('INCR', KEYS[1]); return redis.call('INCR', KEYS[1])");

    const pipeline = client.pipeline() as unknown as ScriptedPipeline;
    expect(Object.keys(pipeline)).not.toContain("say7");
    const results = await pipeline
      .set(key("a"), "1")
      .say7(key("a"), "x")
      .incrTwice(key("a"))
      .say39Buffer(key("a"), "y")
      .get(key("a"))
      .exec();
    expect(results).toEqual([
      [null, "OK"],
      [null, "x7"],
      [null, 3],
      [null, Buffer.from("y39")],
      [null, "3"],
    ]);
  });

  it("run defined commands batched in one tick (auto-pipelining), one defined late too", async () => {
    const { client, key } = await openClient();
    const scripted = client as unknown as Scripted;
    define(client, "say", "return ARGV[1]");
    expect(await scripted.say!(key("a"), "first")).toBe("first");
    define(client, "late", "return 'late ' .. ARGV[1]");
    const answers = await Promise.all([
      scripted.say!(key("a"), "one"),
      scripted.late!(key("a"), "two"),
      client.incr(key("n")),
      scripted.say!(key("b"), "three"),
    ]);
    expect(answers).toEqual(["one", "late two", 1, "three"]);
  });
});
