import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pollUntil, startRedisProcess, type RedisProcess } from "./redis-process.js";
import {
  pairsToObject,
  parseInfo,
  redisCommand,
  type RedisAddress,
  type RespReply,
} from "./resp-command.js";

/** Options of {@link startSentinelSet}. */
export interface SentinelSetOptions {
  /** The name the sentinels monitor the master under. Default `mymaster`. */
  masterName?: string;
  /** Replicas of the master (failover needs at least one). Default 1. */
  replicas?: number;
  /** Sentinel processes. Default 3. */
  sentinels?: number;
  /** `requirepass` (and `masterauth`) of the master and replicas; none by default. */
  password?: string;
  /** `requirepass` of the sentinels themselves; none by default. */
  sentinelPassword?: string;
  /** Sentinels that must agree the master is down. Default 2. */
  quorum?: number;
  /** `down-after-milliseconds`: how long the master may be silent. Default 1000. */
  downAfterMs?: number;
  /** `failover-timeout`: when a stuck failover is tried again. Default 5000. */
  failoverTimeoutMs?: number;
  /** How long start-up may take, replication and discovery included. Default 30 s. */
  startTimeoutMs?: number;
}

/** A master, its replicas and the sentinels watching them; see {@link startSentinelSet}. */
export interface SentinelSet {
  /** The master at start-up. */
  master: RedisAddress;
  /** The replicas at start-up. */
  replicas: RedisAddress[];
  sentinels: RedisAddress[];
  masterName: string;
  password: string | undefined;
  sentinelPassword: string | undefined;
  /** `redis+sentinel://[:password@]host:port,host:port/<masterName>` (the spec's `store.url`). */
  url: string;
  /** The master the sentinels name now (the first sentinel that answers). */
  currentMaster(): Promise<RedisAddress>;
  /** SIGKILLs the current master's process; resolves its address once it has exited. */
  killMaster(): Promise<RedisAddress>;
  /**
   * Resolves the new master once every sentinel names one other than the
   * master last killed (or, with none killed, the one at start-up) and it
   * answers `ROLE` as master. Default timeout 30 s.
   */
  waitForFailover(timeoutMs?: number): Promise<RedisAddress>;
  /** Kills every process and deletes the temp dir; safe to call twice. */
  stop(): Promise<void>;
}

const HOST = "127.0.0.1";

/**
 * Starts a master, `replicas` replicas and `sentinels` sentinels on free
 * ports, and resolves once the replicas replicate (`master_link_status:up`)
 * and every sentinel knows every other sentinel and every replica, so that a
 * failover can start at once. On failure everything started is killed.
 */
export async function startSentinelSet(options: SentinelSetOptions = {}): Promise<SentinelSet> {
  const settings = {
    masterName: options.masterName ?? "mymaster",
    replicas: options.replicas ?? 1,
    sentinels: options.sentinels ?? 3,
    quorum: options.quorum ?? 2,
    downAfterMs: options.downAfterMs ?? 1_000,
    failoverTimeoutMs: options.failoverTimeoutMs ?? 5_000,
    startTimeoutMs: options.startTimeoutMs ?? 30_000,
    password: options.password,
    sentinelPassword: options.sentinelPassword,
  };
  if (settings.quorum > settings.sentinels) {
    throw new Error(`quorum ${settings.quorum} is more than the ${settings.sentinels} sentinels`);
  }
  const dir = await mkdtemp(join(tmpdir(), "redis-sentinel-set-"));
  const processes: RedisProcess[] = [];
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await Promise.all(processes.map((node) => node.kill()));
      await rm(dir, { recursive: true, force: true });
    })());
  try {
    const started = await startProcesses(settings, dir, processes);
    return describeSet(settings, started, stop);
  } catch (err) {
    await stop();
    throw err;
  }
}

type Settings = Required<Omit<SentinelSetOptions, "password" | "sentinelPassword">> &
  Pick<SentinelSetOptions, "password" | "sentinelPassword">;

interface Started {
  master: RedisProcess;
  replicas: RedisProcess[];
  sentinels: RedisProcess[];
  all: RedisProcess[];
}

async function startProcesses(
  settings: Settings,
  dir: string,
  processes: RedisProcess[],
): Promise<Started> {
  const auth = dataNodeAuth(settings.password);
  const keep = (node: RedisProcess) => (processes.push(node), node);
  const master = keep(
    await startRedisProcess({
      name: "master",
      parentDir: dir,
      password: settings.password,
      config: () => auth,
    }),
  );
  const replicas = await Promise.all(
    Array.from({ length: settings.replicas }, async (_, i) =>
      keep(
        await startRedisProcess({
          name: `replica-${i + 1}`,
          parentDir: dir,
          password: settings.password,
          config: () => [...auth, `replicaof ${HOST} ${master.port}`],
        }),
      ),
    ),
  );
  const deadline = Date.now() + settings.startTimeoutMs;
  const remaining = () => Math.max(1_000, deadline - Date.now());
  await Promise.all(replicas.map((replica) => waitForReplication(replica, settings, remaining())));
  const sentinels = await Promise.all(
    Array.from({ length: settings.sentinels }, async (_, i) =>
      keep(
        await startRedisProcess({
          name: `sentinel-${i + 1}`,
          parentDir: dir,
          sentinel: true,
          password: settings.sentinelPassword,
          config: () => sentinelConfig(settings, master),
        }),
      ),
    ),
  );
  await Promise.all(
    sentinels.map((sentinel) => waitForDiscovery(sentinel, settings, master, remaining())),
  );
  return { master, replicas, sentinels, all: processes };
}

function dataNodeAuth(password: string | undefined): string[] {
  // masterauth on every node: any of them may become a replica of another.
  return password === undefined ? [] : [`requirepass ${password}`, `masterauth ${password}`];
}

function sentinelConfig(settings: Settings, master: RedisProcess): string[] {
  const name = settings.masterName;
  return [
    `sentinel monitor ${name} ${HOST} ${master.port} ${settings.quorum}`,
    `sentinel down-after-milliseconds ${name} ${settings.downAfterMs}`,
    `sentinel failover-timeout ${name} ${settings.failoverTimeoutMs}`,
    `sentinel parallel-syncs ${name} 1`,
    ...(settings.password === undefined ? [] : [`sentinel auth-pass ${name} ${settings.password}`]),
    ...(settings.sentinelPassword === undefined
      ? []
      : [
          `requirepass ${settings.sentinelPassword}`,
          `sentinel sentinel-pass ${settings.sentinelPassword}`,
        ]),
  ];
}

async function waitForReplication(
  replica: RedisProcess,
  settings: Settings,
  timeoutMs: number,
): Promise<void> {
  await pollUntil(
    `${replica.name} (port ${replica.port}) to replicate (master_link_status:up)`,
    async () => {
      const info = parseInfo(
        await redisCommand(replica, ["INFO", "replication"], { password: settings.password }),
      );
      if (info.master_link_status === "up") return true;
      throw new Error(`master_link_status:${info.master_link_status}`);
    },
    { timeoutMs, details: () => replica.logTail() },
  );
}

async function waitForDiscovery(
  sentinel: RedisProcess,
  settings: Settings,
  master: RedisProcess,
  timeoutMs: number,
): Promise<void> {
  const name = settings.masterName;
  const ask = (...args: string[]) =>
    redisCommand(sentinel, ["SENTINEL", ...args], { password: settings.sentinelPassword });
  await pollUntil(
    `${sentinel.name} (port ${sentinel.port}) to know the master, ${settings.sentinels - 1} other sentinels and ${settings.replicas} replicas`,
    async () => {
      const address = asAddress(await ask("get-master-addr-by-name", name));
      if (address?.port !== master.port) throw new Error(`names master ${JSON.stringify(address)}`);
      const peers = healthy(await ask("sentinels", name), "sentinel");
      if (peers < settings.sentinels - 1) throw new Error(`knows ${peers} other sentinels`);
      const replicas = healthy(await ask("replicas", name), "slave");
      if (replicas < settings.replicas) throw new Error(`knows ${replicas} healthy replicas`);
      return true;
    },
    { timeoutMs, details: () => sentinel.logTail() },
  );
}

/** How many entries of a SENTINEL SENTINELS / REPLICAS reply have exactly `flags` and a live link. */
function healthy(reply: RespReply, flags: string): number {
  if (!Array.isArray(reply)) return 0;
  return reply
    .map(pairsToObject)
    .filter(
      (entry) =>
        entry.flags === flags &&
        (entry["master-link-status"] === undefined || entry["master-link-status"] === "ok"),
    ).length;
}

function asAddress(reply: RespReply): RedisAddress | undefined {
  if (!Array.isArray(reply) || reply.length < 2) return undefined;
  return { host: String(reply[0]), port: Number(reply[1]) };
}

function describeSet(settings: Settings, started: Started, stop: () => Promise<void>): SentinelSet {
  const address = (node: RedisProcess): RedisAddress => ({ host: node.host, port: node.port });
  const name = settings.masterName;
  const auth = settings.password === undefined ? "" : `:${encodeURIComponent(settings.password)}@`;
  const hosts = started.sentinels.map((s) => `${s.host}:${s.port}`).join(",");
  let lastMaster = address(started.master);
  const currentMaster = async (): Promise<RedisAddress> => {
    const reasons: string[] = [];
    for (const sentinel of started.sentinels) {
      if (sentinel.isDead()) continue;
      try {
        const reply = await redisCommand(sentinel, ["SENTINEL", "get-master-addr-by-name", name], {
          password: settings.sentinelPassword,
        });
        const found = asAddress(reply);
        if (found) return found;
        reasons.push(`${sentinel.name}: ${JSON.stringify(reply)}`);
      } catch (err) {
        reasons.push((err as Error).message);
      }
    }
    throw new Error(`no sentinel names a master for ${name}: ${reasons.join("; ")}`);
  };
  return {
    master: address(started.master),
    replicas: started.replicas.map(address),
    sentinels: started.sentinels.map(address),
    masterName: name,
    password: settings.password,
    sentinelPassword: settings.sentinelPassword,
    url: `redis+sentinel://${auth}${hosts}/${name}`,
    currentMaster,
    async killMaster() {
      const master = await currentMaster();
      const node = started.all.find((candidate) => candidate.port === master.port);
      if (!node)
        throw new Error(`the sentinels name ${master.host}:${master.port}, not one of ours`);
      await node.kill();
      lastMaster = master;
      return master;
    },
    async waitForFailover(timeoutMs = 30_000) {
      const from = lastMaster;
      const promoted = await waitForNewMaster(started, settings, from, timeoutMs);
      lastMaster = promoted;
      return promoted;
    },
    stop,
  };
}

async function waitForNewMaster(
  started: Started,
  settings: Settings,
  from: RedisAddress,
  timeoutMs: number,
): Promise<RedisAddress> {
  const live = started.sentinels.filter((sentinel) => !sentinel.isDead());
  return pollUntil(
    `the sentinels to promote a master other than port ${from.port}`,
    async () => {
      const named = await Promise.all(
        live.map(async (sentinel) =>
          asAddress(
            await redisCommand(
              sentinel,
              ["SENTINEL", "get-master-addr-by-name", settings.masterName],
              { password: settings.sentinelPassword },
            ),
          ),
        ),
      );
      const ports = new Set(named.map((address) => address?.port));
      const [candidate] = named;
      if (ports.size !== 1 || !candidate || candidate.port === from.port) {
        throw new Error(`sentinels name ports ${[...named.map((a) => a?.port)].join(", ")}`);
      }
      const role = await redisCommand(candidate, ["ROLE"], { password: settings.password });
      if (!Array.isArray(role) || role[0] !== "master") {
        throw new Error(`port ${candidate.port} answers ROLE ${JSON.stringify(role)}`);
      }
      return candidate;
    },
    { timeoutMs, intervalMs: 200, details: () => `${live[0]?.name} log:\n${live[0]?.logTail(25)}` },
  );
}
