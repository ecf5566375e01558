import { createClient, createCluster, createSentinel } from "@keyv/redis";
import { Queue, Worker, createNodeRedisClient } from "bullmq";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { startRedisProcess } from "./redis-topology/redis-process.js";
import {
  pollUntil,
  redisCommand,
  startRedisCluster,
  startSentinelSet,
  type RedisAddress,
  type RedisCluster,
  type SentinelSet,
} from "./redis-topology.js";

// Start-up about 2.5 s and a failover about 2.5 s each on an idle machine; the whole file
// took about 15 s. The limits below leave room for a loaded 2-core machine.
const FILE_TIMEOUT = 60_000;
const PASSWORD = "topology-secret";
const SENTINEL_PASSWORD = "sentinel-secret";

/** Retries `attempt` (each try cut after 2 s: a command may hang mid-failover) until it resolves. */
function eventually<T>(what: string, attempt: () => Promise<T>, timeoutMs = 20_000): Promise<T> {
  return pollUntil(what, () => withTimeout(attempt(), 2_000), { timeoutMs, intervalMs: 200 });
}

async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function expectDead(address: RedisAddress): Promise<void> {
  await expect(redisCommand(address, ["PING"], { timeoutMs: 500 })).rejects.toThrow(
    /ECONNREFUSED|closed/,
  );
}

describe("startSentinelSet", () => {
  let set: SentinelSet | undefined;
  afterEach(async () => {
    await set?.stop();
    set = undefined;
  });

  test(
    "the sentinels promote the replica when the master is killed, and node-redis follows",
    async () => {
      const startedAt = Date.now();
      set = await startSentinelSet({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
      console.log(`sentinel set started in ${Date.now() - startedAt} ms: ${set.url}`);
      expect(set.url).toBe(
        `redis+sentinel://:${PASSWORD}@${set.sentinels.map((s) => `${s.host}:${s.port}`).join(",")}/mymaster`,
      );
      expect(await set.currentMaster()).toEqual(set.master);

      const client = createSentinel({
        name: set.masterName,
        sentinelRootNodes: set.sentinels,
        nodeClientOptions: { password: PASSWORD },
        sentinelClientOptions: { password: SENTINEL_PASSWORD },
      });
      client.on("error", () => undefined);
      await client.connect();
      try {
        await client.set("greeting", "before");
        const [replica] = set.replicas;
        await eventually("the replica to hold the key", async () =>
          (await redisCommand(replica!, ["GET", "greeting"], { password: PASSWORD })) === "before"
            ? true
            : undefined,
        );
        await runOneJob(set.master, "before-failover");

        const killed = await set.killMaster();
        const killedAt = Date.now();
        const promoted = await set.waitForFailover(30_000);
        console.log(`sentinel failover: new master after ${Date.now() - killedAt} ms`);
        expect(killed).toEqual(set.master);
        expect(promoted).toEqual(replica);
        expect(await set.currentMaster()).toEqual(promoted);
        await expectDead(killed);

        // The long-lived client finds the new master by itself (its commands wait meanwhile).
        await eventually("the sentinel client to write again", () =>
          client.set("greeting", "after"),
        );
        console.log(
          `createSentinel client writes again ${Date.now() - killedAt} ms after the kill`,
        );
        expect(await client.get("greeting")).toBe("after");
        expect(await redisCommand(promoted, ["GET", "greeting"], { password: PASSWORD })).toBe(
          "after",
        );
        // BullMQ on node-redis, re-resolved through the sentinels: the queue's history survived.
        expect(await runOneJob(promoted, "after-failover")).toMatchObject({ completed: 2 });
      } finally {
        client.destroy();
      }
      await set.stop();
      await set.stop();
      for (const node of [set.master, ...set.replicas, ...set.sentinels]) await expectDead(node);
    },
    FILE_TIMEOUT,
  );
});

/** Runs one BullMQ job on a plain node-redis client of `master`; resolves the queue's job counts. */
async function runOneJob(master: RedisAddress, name: string): Promise<Record<string, number>> {
  const client = createClient({ url: `redis://:${PASSWORD}@${master.host}:${master.port}` });
  client.on("error", () => undefined);
  await client.connect();
  const workerClient = client.duplicate();
  workerClient.on("error", () => undefined);
  await workerClient.connect();
  const queue = new Queue("smoke", {
    connection: createNodeRedisClient(client),
    prefix: "{smoke}",
  });
  const worker = new Worker("smoke", async (job) => `done ${job.name}`, {
    connection: createNodeRedisClient(workerClient),
    prefix: "{smoke}",
  });
  try {
    const finished = new Promise<string>((resolve, reject) => {
      worker.on("completed", (_job, result: string) => resolve(result));
      worker.on("failed", (_job, err) => reject(err));
    });
    await queue.add(name, {});
    expect(await withTimeout(finished, 10_000)).toBe(`done ${name}`);
    return await queue.getJobCounts("completed", "failed", "waiting");
  } finally {
    await worker.close();
    await queue.close();
    client.destroy();
    workerClient.destroy();
  }
}

describe("startRedisCluster", () => {
  let cluster: RedisCluster | undefined;
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  test(
    "a replica takes over the slots of a killed master, and node-redis follows once told to rediscover",
    async () => {
      const startedAt = Date.now();
      cluster = await startRedisCluster({ password: PASSWORD });
      console.log(`cluster started in ${Date.now() - startedAt} ms: ${cluster.url}`);
      const masters = cluster.nodes.filter((node) => node.role === "master");
      const replicas = cluster.nodes.filter((node) => node.role === "replica");
      expect(masters).toHaveLength(3);
      expect(replicas).toHaveLength(3);

      const client = createCluster({
        rootNodes: cluster.nodes.map((node) => ({ url: `redis://${node.host}:${node.port}` })),
        defaults: { password: PASSWORD },
      });
      client.on("error", () => undefined);
      // node-redis rediscovers slots only on MOVED/ASK, which a dead master never answers:
      // a failed node tells the client to look again (node-redis issue #2806).
      client.on("node-error", () => {
        const live = client.masters.find((master) => master.client?.isReady)?.client;
        if (live) void client._slots.rediscover(live).catch(() => undefined);
      });
      await client.connect();
      try {
        const keys = Array.from({ length: 40 }, (_, i) => `key-${i}`);
        for (const key of keys) await client.set(key, "before");
        for (const master of masters) {
          const keysThere = await redisCommand(master, ["DBSIZE"], { password: PASSWORD });
          expect(keysThere, `keys on master ${master.port}`).toBeGreaterThan(0);
        }
        // The victim's writes reach its replica before it dies.
        expect(await client.sendCommand("key-0", false, ["WAIT", "1", "5000"])).toBe(1);

        const killed = await cluster.killMaster({ key: "key-0" });
        const killedAt = Date.now();
        const promoted = await cluster.waitForFailover(30_000);
        console.log(`cluster failover: slots served again after ${Date.now() - killedAt} ms`);
        expect(masters.map((m) => m.port)).toContain(killed.port);
        expect(replicas.map((r) => r.port)).toContain(promoted.port);
        await expectDead(killed);

        await eventually("the cluster client to write again", () => client.set("key-0", "after"));
        console.log(`createCluster client writes again ${Date.now() - killedAt} ms after the kill`);
        expect(await client.get("key-0")).toBe("after");
        for (const key of keys.slice(1)) expect(await client.get(key), key).toBe("before");
      } finally {
        client.destroy();
      }
      await cluster.stop();
      await cluster.stop();
      for (const node of cluster.nodes) await expectDead(node);
    },
    FILE_TIMEOUT,
  );
});

describe("startRedisProcess", () => {
  test("a redis-server that cannot start is reported with its log", async () => {
    const dir = await mkdtemp(join(tmpdir(), "redis-topology-test-"));
    try {
      await expect(
        startRedisProcess({
          name: "broken",
          parentDir: dir,
          config: () => ["no-such-directive yes"],
        }),
      ).rejects.toThrow(/broken \(port \d+\) exited at start-up:[\s\S]*no-such-directive/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
