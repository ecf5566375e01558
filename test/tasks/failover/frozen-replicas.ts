import { afterAll, beforeAll, onTestFinished } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import {
  redisCommand,
  startSentinelSet,
  type RedisAddress,
  type SentinelSet,
} from "../../support/redis-topology.js";
import { slow } from "../../support/time-factor.js";
import { getTask, waitUntil, type Target } from "../task-api.js";
import { TOPOLOGY_PASSWORD } from "../../support/redis-topologies.js";

/*
 * What the tests of `store.minReplicas` do to a Sentinel set (started with
 * TOPOLOGY_PASSWORD): freeze its replicas, so that a write the master takes
 * stays with the master, and read the master. "The master" is the one the
 * sentinels name now: on a loaded machine a master slow to answer their
 * pings for `down-after-milliseconds` is failed over before the test gets to
 * it, and freezing the start-up replicas would then freeze the master.
 */

const options = { password: TOPOLOGY_PASSWORD };

/** The Sentinel set and the fake channel a file's tests share (filled in by `beforeAll`). */
export interface ReplicaSetFixture {
  set: SentinelSet;
  upstream: FakeUpstream;
}

/**
 * Starts, for the calling test file, a Sentinel set with two replicas (the
 * promoted one has another to confirm writes with) and a fake channel; both
 * stop after the file's last test.
 */
export function useReplicaSet(): ReplicaSetFixture {
  const fixture = {} as ReplicaSetFixture;
  beforeAll(async () => {
    [fixture.set, fixture.upstream] = await Promise.all([
      // A master silent for 1 s (the topologies' default) on a loaded machine (the promoted one
      // syncing the thawed replicas behind the 32 MB fill) was failed over a second time.
      startSentinelSet({ password: TOPOLOGY_PASSWORD, replicas: 2, downAfterMs: slow(2_000) }),
      startFakeUpstream(),
    ]);
  }, slow(60_000));
  afterAll(async () => {
    await Promise.all([fixture.set?.stop(), fixture.upstream?.close()]);
  });
  return fixture;
}

/** The pid of a Redis server (or, without `auth`, a sentinel), as it reports it. */
async function pidOf(node: RedisAddress, auth: { password?: string } = options): Promise<number> {
  const info = String(await redisCommand(node, ["INFO", "server"], auth));
  return Number(/process_id:(\d+)/.exec(info)![1]);
}

/** SIGSTOPs `pids`; resolves the call that SIGCONTs them, once (also made when the test ends). */
function freeze(pids: readonly number[]): () => void {
  let frozen = true;
  const thaw = () => {
    if (!frozen) return;
    frozen = false;
    for (const pid of pids) process.kill(pid, "SIGCONT");
  };
  for (const pid of pids) process.kill(pid, "SIGSTOP");
  onTestFinished(thaw);
  return thaw;
}

/**
 * Freezes (SIGSTOP) the set's sentinels and SIGKILLs its master: a client
 * that then asks the sentinels for the master waits on them (they accept the
 * connection and never answer). Resolves a call that thaws them, and with
 * them the failover (also called when the test ends).
 */
export async function killMasterBehindFrozenSentinels(set: SentinelSet): Promise<() => void> {
  const masterPid = await pidOf(await set.currentMaster());
  const pids = await Promise.all(set.sentinels.map((node) => pidOf(node, {})));
  // A sentinel whose clock jumped 2 s (frozen) idles 30 s in TILT mode before it acts: 1 s here.
  for (const node of set.sentinels) {
    await redisCommand(node, ["SENTINEL", "DEBUG", "tilt-period", "1000"]);
  }
  const thaw = freeze(pids);
  process.kill(masterPid, "SIGKILL");
  return thaw;
}

/**
 * Freezes (SIGSTOP) the set's replicas; resolves a call that thaws them
 * (also called when the test ends). With `fill`, the master then takes a
 * value larger than the sockets' buffers (32 MB): a frozen replica's socket
 * would otherwise receive what follows and hand it over once thawed, while
 * behind that value it stays in the master's own memory and dies with it.
 */
export async function freezeReplicas(
  set: SentinelSet,
  { fill = false }: { fill?: boolean } = {},
): Promise<() => void> {
  const master = await set.currentMaster();
  const replicas = [set.master, ...set.replicas].filter((node) => node.port !== master.port);
  const pids = await Promise.all(replicas.map((node) => pidOf(node)));
  const thaw = freeze(pids);
  if (fill) {
    await redisCommand(master, ["SET", "filler", "x".repeat(32 << 20)], {
      ...options,
      timeoutMs: 10_000,
    });
  }
  return thaw;
}

/** A task's record as the master holds it (its key ends with `task:<id>`); "" when none. */
export async function recordOnMaster(set: SentinelSet, id: string): Promise<string> {
  const master = await set.currentMaster();
  const keys = (await redisCommand(master, ["KEYS", `*task:${id}`], options)) as string[];
  return keys.length === 1 ? String(await redisCommand(master, ["GET", keys[0]!], options)) : "";
}

/** A task's status as the master holds it. */
export async function statusOnMaster(set: SentinelSet, id: string): Promise<string | undefined> {
  return /"status":"([a-z_]+)"/.exec(await recordOnMaster(set, id))?.[1];
}

/** The task queue's jobs as the master holds them: waiting, active, delayed, and their ids. */
export async function queueOnMaster(set: SentinelSet): Promise<string> {
  const master = await set.currentMaster();
  const keys = (await redisCommand(master, ["KEYS", "*image-tasks:*"], options)) as string[];
  const parts: string[] = [`master ${master.port} (at start-up ${set.master.port})`];
  for (const key of keys.sort()) {
    const type = String(await redisCommand(master, ["TYPE", key], options));
    const name = key.slice(key.indexOf("image-tasks:") + "image-tasks:".length);
    if (type === "list") {
      const ids = (await redisCommand(master, ["LRANGE", key, "0", "-1"], options)) as string[];
      parts.push(`${name}=[${ids.join(",")}]`);
    } else if (type === "zset") {
      const ids = (await redisCommand(master, ["ZRANGE", key, "0", "-1"], options)) as string[];
      parts.push(`${name}={${ids.join(",")}}`);
    } else if (!/^task_/.test(name)) parts.push(`${name}:${type}`);
  }
  return parts.join(" ");
}

/**
 * Kills the master (which holds what the frozen replicas never got), thaws
 * the replicas, and resolves once the sentinels promoted one and `app`'s
 * task store answers for task `id` again (503 until the service follows the
 * promoted master).
 */
export async function killMasterAndFollow(
  set: SentinelSet,
  thaw: () => void,
  app: Target,
  id: string,
): Promise<void> {
  await set.killMaster();
  thaw();
  await set.waitForFailover(30_000);
  await waitUntil(
    async () => (await getTask(app, id)).status === 200,
    "the task store to answer again",
    30_000,
  );
}
