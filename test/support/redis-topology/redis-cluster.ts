import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pollUntil, startRedisProcess, type RedisProcess } from "./redis-process.js";
import { parseInfo, redisCommand, type RedisAddress, type RespReply } from "./resp-command.js";

/** Options of {@link startRedisCluster}. */
export interface RedisClusterOptions {
  /** Masters (the slots are split between them); at least 3. Default 3. */
  masters?: number;
  /** Replicas of each master (a failover needs one). Default 1. */
  replicasPerMaster?: number;
  /** `requirepass` (and `masterauth`) of every node; none by default. */
  password?: string;
  /** `cluster-node-timeout`: how long a silent node takes to be failed. Default 1000. */
  nodeTimeoutMs?: number;
  /** How long start-up may take. Default 30 s. */
  startTimeoutMs?: number;
}

/** A node of the cluster as it was at start-up. */
export interface ClusterNode extends RedisAddress {
  role: "master" | "replica";
  /** The node id (`CLUSTER MYID`). */
  id: string;
}

/** A Redis Cluster started by a test; see {@link startRedisCluster}. */
export interface RedisCluster {
  /** Every node with its role at start-up (masters first). */
  nodes: ClusterNode[];
  password: string | undefined;
  /** `redis+cluster://[:password@]host:port,...` of every node (the spec's `store.url`). */
  url: string;
  /**
   * SIGKILLs one master: the `index`-th of the masters serving slots now
   * (in slot order), or the one serving `{ key }`. Resolves its address and
   * the slot ranges it served once it has exited.
   */
  killMaster(which?: number | { key: string }): Promise<KilledMaster>;
  /**
   * Resolves the master now serving the slots of the master last killed, once
   * every surviving node says `cluster_state:ok` and maps those slots to a
   * node that answers `ROLE` as master. Default timeout 30 s.
   */
  waitForFailover(timeoutMs?: number): Promise<RedisAddress>;
  /** Kills every node and deletes the temp dir; safe to call twice. */
  stop(): Promise<void>;
}

/** What {@link RedisCluster.killMaster} killed. */
export interface KilledMaster extends RedisAddress {
  /** `[first, last]` slot ranges it served. */
  slots: Array<[number, number]>;
}

/**
 * Starts `masters × (1 + replicasPerMaster)` nodes in cluster mode on free
 * ports (each with its own `cluster-port`, so no `port + 10000` rule needs
 * to hold), joins them with `redis-cli --cluster create`, and resolves once
 * every node says `cluster_state:ok`, knows every other node, and every
 * replica replicates. On failure everything started is killed.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const settings = {
    masters: options.masters ?? 3,
    replicasPerMaster: options.replicasPerMaster ?? 1,
    password: options.password,
    nodeTimeoutMs: options.nodeTimeoutMs ?? 1_000,
    startTimeoutMs: options.startTimeoutMs ?? 30_000,
  };
  if (settings.masters < 3)
    throw new Error(`a cluster needs 3 or more masters, not ${settings.masters}`);
  const dir = await mkdtemp(join(tmpdir(), "redis-cluster-"));
  const processes: RedisProcess[] = [];
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await Promise.all(processes.map((node) => node.kill()));
      await rm(dir, { recursive: true, force: true });
    })());
  try {
    const deadline = Date.now() + settings.startTimeoutMs;
    const remaining = () => Math.max(1_000, deadline - Date.now());
    const total = settings.masters * (1 + settings.replicasPerMaster);
    const started = await Promise.all(
      Array.from({ length: total }, (_, i) =>
        startRedisProcess({
          name: `node-${i + 1}`,
          parentDir: dir,
          clusterBus: true,
          password: settings.password,
          config: () => nodeConfig(settings),
        }).then((node) => (processes.push(node), node)),
      ),
    );
    await createCluster(started, settings, remaining());
    await Promise.all(
      started.map((node) => waitForClusterReady(node, total, settings.password, remaining())),
    );
    const nodes = await describeNodes(started, settings.password);
    return clusterHandle(nodes, started, settings.password, stop);
  } catch (err) {
    await stop();
    throw err;
  }
}

function nodeConfig(settings: { password?: string; nodeTimeoutMs: number }): string[] {
  return [
    "cluster-enabled yes",
    "cluster-config-file nodes.conf",
    `cluster-node-timeout ${settings.nodeTimeoutMs}`,
    ...(settings.password === undefined
      ? []
      : [`requirepass ${settings.password}`, `masterauth ${settings.password}`]),
  ];
}

async function createCluster(
  nodes: RedisProcess[],
  settings: { replicasPerMaster: number; password?: string },
  timeoutMs: number,
): Promise<void> {
  const args = [
    "--cluster",
    "create",
    ...nodes.map((node) => `${node.host}:${node.port}`),
    "--cluster-replicas",
    String(settings.replicasPerMaster),
    "--cluster-yes",
    ...(settings.password === undefined ? [] : ["-a", settings.password, "--no-auth-warning"]),
  ];
  await new Promise<void>((resolve, reject) => {
    execFile("redis-cli", args, { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (!err) return resolve();
      const output = `${stdout}${stderr}`.trim().split("\n").slice(-15).join("\n");
      reject(new Error(`redis-cli --cluster create failed (${err.message}):\n${output}`));
    });
  });
}

async function waitForClusterReady(
  node: RedisProcess,
  total: number,
  password: string | undefined,
  timeoutMs: number,
): Promise<void> {
  await pollUntil(
    `${node.name} (port ${node.port}) to say cluster_state:ok, know ${total} nodes and replicate`,
    async () => {
      const info = parseInfo(await redisCommand(node, ["CLUSTER", "INFO"], { password }));
      if (info.cluster_state !== "ok" || Number(info.cluster_known_nodes) !== total) {
        throw new Error(
          `cluster_state:${info.cluster_state} cluster_known_nodes:${info.cluster_known_nodes}`,
        );
      }
      const replication = parseInfo(
        await redisCommand(node, ["INFO", "replication"], { password }),
      );
      if (replication.role === "slave" && replication.master_link_status !== "up") {
        throw new Error(`master_link_status:${replication.master_link_status}`);
      }
      return true;
    },
    { timeoutMs, details: () => node.logTail() },
  );
}

async function describeNodes(
  started: RedisProcess[],
  password: string | undefined,
): Promise<ClusterNode[]> {
  const nodes = await Promise.all(
    started.map(async (node): Promise<ClusterNode> => {
      const [id, replication] = await Promise.all([
        redisCommand(node, ["CLUSTER", "MYID"], { password }),
        redisCommand(node, ["INFO", "replication"], { password }),
      ]);
      const role = parseInfo(replication).role === "master" ? "master" : "replica";
      return { host: node.host, port: node.port, role, id: String(id) };
    }),
  );
  return [
    ...nodes.filter((n) => n.role === "master"),
    ...nodes.filter((n) => n.role === "replica"),
  ];
}

/** A `CLUSTER SLOTS` entry: a slot range and the node serving it. */
interface SlotRange {
  first: number;
  last: number;
  master: RedisAddress;
}

function parseSlots(reply: RespReply): SlotRange[] {
  if (!Array.isArray(reply)) return [];
  return reply.flatMap((entry) => {
    if (!Array.isArray(entry) || !Array.isArray(entry[2])) return [];
    const [host, port] = entry[2];
    return [
      {
        first: Number(entry[0]),
        last: Number(entry[1]),
        master: { host: String(host), port: Number(port) },
      },
    ];
  });
}

function clusterHandle(
  nodes: ClusterNode[],
  started: RedisProcess[],
  password: string | undefined,
  stop: () => Promise<void>,
): RedisCluster {
  const auth = password === undefined ? "" : `:${encodeURIComponent(password)}@`;
  const live = () => started.filter((node) => !node.isDead());
  const ask = async (command: string[]): Promise<RespReply> => {
    const [first] = live();
    if (!first) throw new Error("every node of the cluster is dead");
    return redisCommand(first, command, { password });
  };
  let lastKilled: KilledMaster | undefined;
  return {
    nodes,
    password,
    url: `redis+cluster://${auth}${nodes.map((n) => `${n.host}:${n.port}`).join(",")}`,
    async killMaster(which = 0) {
      const ranges = parseSlots(await ask(["CLUSTER", "SLOTS"])).sort((a, b) => a.first - b.first);
      const masterPort = await pickMaster(ranges, which, ask);
      const node = started.find((candidate) => candidate.port === masterPort);
      if (!node) throw new Error(`no node of ours listens on port ${masterPort}`);
      await node.kill();
      lastKilled = {
        host: node.host,
        port: node.port,
        slots: ranges.filter((r) => r.master.port === masterPort).map((r) => [r.first, r.last]),
      };
      return lastKilled;
    },
    async waitForFailover(timeoutMs = 30_000) {
      const killed = lastKilled;
      if (!killed) throw new Error("waitForFailover() follows killMaster()");
      return waitForSlotsTakenOver(killed, live(), password, timeoutMs);
    },
    stop,
  };
}

async function pickMaster(
  ranges: SlotRange[],
  which: number | { key: string },
  ask: (command: string[]) => Promise<RespReply>,
): Promise<number> {
  if (typeof which === "number") {
    const masters = [...new Set(ranges.map((range) => range.master.port))];
    const port = masters[which];
    if (port === undefined) throw new Error(`master ${which} of ${masters.length} does not exist`);
    return port;
  }
  const slot = Number(await ask(["CLUSTER", "KEYSLOT", which.key]));
  const range = ranges.find((r) => r.first <= slot && slot <= r.last);
  if (!range) throw new Error(`no master serves slot ${slot} of ${JSON.stringify(which.key)}`);
  return range.master.port;
}

async function waitForSlotsTakenOver(
  killed: KilledMaster,
  survivors: RedisProcess[],
  password: string | undefined,
  timeoutMs: number,
): Promise<RedisAddress> {
  const [firstSlot] = killed.slots[0] ?? [];
  if (firstSlot === undefined) throw new Error(`port ${killed.port} served no slots`);
  return pollUntil(
    `a replica to take over the slots of port ${killed.port} and cluster_state:ok on every surviving node`,
    async () => {
      let owner: RedisAddress | undefined;
      for (const node of survivors) {
        const info = parseInfo(await redisCommand(node, ["CLUSTER", "INFO"], { password }));
        if (info.cluster_state !== "ok")
          throw new Error(`${node.name}: cluster_state:${info.cluster_state}`);
        const ranges = parseSlots(await redisCommand(node, ["CLUSTER", "SLOTS"], { password }));
        const range = ranges.find((r) => r.first <= firstSlot && firstSlot <= r.last);
        if (!range || range.master.port === killed.port) {
          throw new Error(`${node.name}: slot ${firstSlot} still on port ${killed.port}`);
        }
        if (owner && owner.port !== range.master.port)
          throw new Error("the nodes disagree on the new owner");
        owner = range.master;
      }
      if (!owner) throw new Error("no surviving node");
      const role = await redisCommand(owner, ["ROLE"], { password });
      if (!Array.isArray(role) || role[0] !== "master") {
        throw new Error(`port ${owner.port} answers ROLE ${JSON.stringify(role)}`);
      }
      return owner;
    },
    { timeoutMs, intervalMs: 200, details: () => survivors[0]?.logTail(20) ?? "" },
  );
}
