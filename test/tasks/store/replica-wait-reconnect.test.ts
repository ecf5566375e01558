import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import {
  confirmOnReplicas,
  createReplicaWaiter,
  keepRunStepOnReplicas,
} from "../../../src/tasks/store/redis-replica-wait.js";
import {
  pollUntil,
  startRedisProcess,
  type RedisProcess,
} from "../../support/redis-topology/redis-process.js";
import { parseInfo, redisCommand } from "../../support/redis-topology/resp-command.js";

/*
 * With store.minReplicas a run's step (its claim, its end) and a new task
 * count as kept once `WAIT` says a replica holds them. `WAIT` counts what its
 * own connection wrote: over a connection made after the write (the client
 * followed a failover to the promoted master) it answers at once with every
 * replica attached, whatever that master holds. Seen in CI: a run's end lost
 * with the dead master, taken as kept that way, and the task generated a
 * second time. Here a master with one replica loses the write (as a promoted
 * master that never got it) and the client reconnects before it waits.
 */

let dir: string;
let master: RedisProcess;
let replica: RedisProcess;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "replica-wait-"));
  master = await startRedisProcess({ name: "master", parentDir: dir, config: () => [] });
  replica = await startRedisProcess({
    name: "replica",
    parentDir: dir,
    config: () => [`replicaof 127.0.0.1 ${master.port}`],
  });
  await pollUntil(
    "the replica to replicate",
    async () => {
      const info = parseInfo(await redisCommand(replica, ["INFO", "replication"]));
      return info.master_link_status === "up" ? true : undefined;
    },
    { timeoutMs: 10_000, details: () => replica.logTail() },
  );
}, 30_000);

afterAll(async () => {
  await Promise.all([master?.kill(), replica?.kill()]);
  await rm(dir, { recursive: true, force: true });
});

/** A client of the master, the waiter on it, and `key` written "before" then `text`. */
async function writeThenLose(key: string, text: string) {
  const client = new Redis({ host: "127.0.0.1", port: master.port, maxRetriesPerRequest: 3 });
  onTestFinished(() => client.disconnect());
  await once(client, "ready");
  const waiter = createReplicaWaiter(client, key, 1);
  await client.set(key, "before");
  await client.set(key, text);
  const sentOn = waiter.connection();
  // The primary loses the write, and the client reconnects (to it, as to a promoted master).
  await redisCommand(master, ["SET", key, "before"]);
  const reconnected = once(client, "ready");
  await redisCommand(master, ["CLIENT", "KILL", "ID", String(await client.client("ID"))]);
  await reconnected;
  return { client, waiter, sentOn };
}

describe("store.minReplicas after the client reconnected", () => {
  it("writes a run's step again where the primary lacks it, then waits for the replica", async () => {
    const key = "run-step";
    const { client, waiter, sentOn } = await writeThenLose(key, "step");
    let rewrites = 0;
    const kept = await keepRunStepOnReplicas(waiter, {
      ...{ client, key, text: "step", sentOn },
      isBefore: (now) => now === "before",
      rewrite: async () => {
        rewrites += 1;
        return (await client.set(key, "step")) === "OK";
      },
    });
    expect(kept).toBe(true);
    expect(rewrites).toBe(1);
    expect(await redisCommand(master, ["GET", key])).toBe("step");
    expect(await redisCommand(replica, ["GET", key])).toBe("step");
  });

  it("gives a run's step up when another write took its place meanwhile", async () => {
    const key = "run-step-taken";
    const { client, waiter, sentOn } = await writeThenLose(key, "step");
    await redisCommand(master, ["SET", key, "another run"]);
    const kept = await keepRunStepOnReplicas(waiter, {
      ...{ client, key, text: "step", sentOn },
      isBefore: (now) => now === "before",
      rewrite: async () => (await client.set(key, "step")) === "OK",
    });
    expect(kept).toBe(false);
    expect(await redisCommand(master, ["GET", key])).toBe("another run");
  });

  it("cancels a new task instead of taking it as confirmed (503, a retry makes it anew)", async () => {
    const key = "new-task";
    const { client, waiter, sentOn } = await writeThenLose(key, "queued");
    let cancelled = 0;
    const confirmed = confirmOnReplicas(
      { minReplicas: 1, waitMs: 250, keepCancelledMs: 60_000 },
      {
        ...{ client, key, sentOn, waiter },
        cancel: async () => {
          cancelled += 1;
        },
      },
    );
    await expect(confirmed).rejects.toMatchObject({ code: "store_unavailable" });
    expect(cancelled).toBe(1);
  });
});
