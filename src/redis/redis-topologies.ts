import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { RedisTopology } from "../config/schema/redis-topology.js";
import { endsWhenDisconnected } from "./ends-when-disconnected.js";
import { lightPipelines } from "./light-pipelines.js";
import type { RedisClient } from "./redis-client.js";

/*
 * What sets one Redis deployment apart from another, told apart here alone.
 * One server and a Sentinel set's master are one connection (`Redis`); a
 * Cluster (`Cluster`) is a connection per node and a slot map, where a script
 * or a transaction may only touch keys of one slot. Everything else takes the
 * same commands, and no other file asks which deployment it runs on.
 */

/** Retries back off to 2 s between attempts. */
const backoff = (attempt: number) => Math.min(100 * 2 ** attempt, 2_000);

/** How long a sentinel may take to name the master, in ms. */
const SENTINEL_COMMAND_TIMEOUT_MS = 5_000;

/** What every connection shares, whatever the deployment. */
function connectionOptions(): RedisOptions {
  return {
    lazyConnect: true,
    connectTimeout: 5_000,
    // While Redis is away (down, or mid-failover) commands fail at once: a request answers 503
    // `store_unavailable` rather than wait. Worker connections wait instead (see bullmq-worker).
    enableOfflineQueue: false,
    maxRetriesPerRequest: null,
    // A command that was on a lost connection may have run: it fails, and is never sent again.
    autoResendUnfulfilledCommands: false,
    retryStrategy: backoff,
    // A master demoted under a live connection answers writes READONLY: find the new one.
    reconnectOnError: (err) => (err.message.startsWith("READONLY") ? 2 : false),
    // A tick's commands go in one write: a socket write costs more than the command's own work,
    // and the shared client's BullMQ job adds, made by the replies of one batch of the store's
    // creates, come all at once. (ioredis never pipelines its own exceptions: subscriptions,
    // SELECT, AUTH, MULTI.)
    enableAutoPipelining: true,
  };
}

/** An ioredis client for `topology`, not connected yet, its pipelines cheap (see lightPipelines). */
export function createRedisClient(topology: RedisTopology, sentinelPassword?: string): RedisClient {
  const client = newRedisClient(topology, sentinelPassword);
  lightPipelines(client);
  return client;
}

function newRedisClient(topology: RedisTopology, sentinelPassword?: string): RedisClient {
  const common = connectionOptions();
  switch (topology.mode) {
    case "standalone":
      return new Redis(topology.url, { ...common, ...(topology.tls ? { tls: {} } : {}) });
    case "sentinel":
      return new Redis({
        ...common,
        sentinels: topology.sentinels,
        name: topology.masterName,
        db: topology.db,
        username: topology.username,
        password: topology.password,
        sentinelPassword,
        sentinelRetryStrategy: backoff,
        // A sentinel that takes the connection and never answers (paused, overloaded) is left
        // for the next one: without it the client's connect waits on it for ever.
        sentinelCommandTimeout: SENTINEL_COMMAND_TIMEOUT_MS,
        // Not ioredis's failoverDetector: its reconnect on the sentinels' +switch-master message
        // could hang, right after the client had found the new master. A demoted master that
        // stays up answers writes READONLY, which reconnects (reconnectOnError).
        ...(topology.tls ? { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
      });
    case "cluster": {
      const clusterOptions: ClusterOptions = {
        lazyConnect: true,
        enableOfflineQueue: false,
        clusterRetryStrategy: backoff,
        // As on one server (see connectionOptions): a tick's commands in one write per node.
        enableAutoPipelining: true,
        // Managed clusters (ElastiCache, Memorystore) answer with names their certificates hold.
        dnsLookup: (address, callback) => callback(null, address),
        redisOptions: {
          ...common,
          username: topology.username,
          password: topology.password,
          ...(topology.tls ? { tls: {} } : {}),
        },
      };
      return new Cluster(topology.nodes, clusterOptions);
    }
  }
}

/**
 * The start of every key a deployment writes: `store.prefix` as it is on one
 * server or a Sentinel set (the layout earlier releases wrote), and in a hash
 * tag (`{image-task-sidecar}`) on a Redis Cluster, so that every key of the
 * deployment (records, indexes, the queues) sits in one hash slot and each
 * script and transaction touches one slot. A prefix that holds a tag already
 * is kept as it is.
 */
export function deploymentKeyPrefix(prefix: string, topology: RedisTopology): string {
  if (topology.mode !== "cluster" || /\{[^}]+\}/.test(prefix)) return prefix;
  return `{${prefix}}`;
}

/** Whether `client` is a Cluster (its own `isCluster` flag). */
function isCluster(client: RedisClient): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true;
}

/**
 * `client` where earlier releases may have written (one server, a Sentinel
 * set's master), for the upgrade step; undefined on a Cluster, which is new to
 * this release and holds nothing of theirs.
 */
export function earlierReleasesClient(client: RedisClient): Redis | undefined {
  return isCluster(client) ? undefined : client;
}

/**
 * Calls `watch` for what a command deadline watches: the client and the
 * connection a hung command cuts (on one server or a Sentinel set, the
 * client's own), or on a Cluster, the cluster itself (no connection of its
 * own: its deadline covers redirections and retries) and then each node's
 * connection as the cluster makes it.
 */
export function eachConnection(
  client: RedisClient,
  watch: (target: Redis | Cluster, connection: Redis | undefined) => void,
): void {
  if (isCluster(client)) {
    watch(client, undefined);
    client.on("+node", (node: Redis) => watch(node, node));
  } else {
    watch(client, client);
  }
}

/**
 * A client of its own on the same deployment (same deadlines), not connected
 * yet, that writes the commands of one tick to the socket at once (ioredis's
 * auto-pipelining): the task store's, whose steps send several commands and
 * scripts at a time and whose many requests would otherwise each cost a
 * socket write. BullMQ stays on connections of its own.
 */
export function duplicatePipelined(client: RedisClient): RedisClient {
  const options = { enableAutoPipelining: true };
  const connection = isCluster(client) ? client.duplicate([], options) : client.duplicate(options);
  lightPipelines(connection);
  return connection;
}

/**
 * Commands a pipelined connection sends on their own: a blocking read held
 * in an auto-pipeline would hold back every command queued behind it.
 */
const BLOCKING_COMMANDS = ["bzpopmin", "bzpopmax", "blpop", "brpop", "brpoplpush", "blmove"];

/**
 * A client of its own on the same deployment (same deadlines), not connected
 * yet, whose commands wait out an outage or a failover instead of failing at
 * once, as a BullMQ worker's connection must. On one server or a Sentinel set,
 * the clients BullMQ duplicates from it end when disconnected between two
 * reconnect attempts (see `endsWhenDisconnected`).
 */
export function duplicateWaiting(client: RedisClient): RedisClient {
  // Pipelined too: a worker finishes the runs that one reply of the store settled at once.
  const options = {
    enableOfflineQueue: true,
    enableAutoPipelining: true,
    autoPipeliningIgnoredCommands: BLOCKING_COMMANDS,
  };
  // BullMQ defines its scripts on it: its batches' pipelines are made light.
  if (isCluster(client)) {
    const connection = client.duplicate([], options);
    lightPipelines(connection);
    return connection;
  }
  const connection = client.duplicate(options);
  lightPipelines(connection);
  endsWhenDisconnected(connection);
  return connection;
}

/**
 * Calls `update` with the primary's `host:port` whenever the client may have
 * a new one: on each connect (a Sentinel set's client reconnects to the
 * master the sentinels name) the address it connected to; on a Cluster, its
 * masters (sorted) after each refresh of the slot map and each node lost.
 */
export function followPrimaries(client: RedisClient, update: (primary: string[]) => void): void {
  if (isCluster(client)) {
    const read = () =>
      update(
        client
          .nodes("master")
          .map((node) => `${node.options.host}:${node.options.port}`)
          .sort(),
      );
    client.on("ready", read);
    client.on("refresh", read);
    client.on("-node", read);
    return;
  }
  client.on("ready", () => {
    const { stream } = client as Redis & {
      stream?: { remoteAddress?: string; remotePort?: number };
    };
    if (stream?.remoteAddress) update([`${stream.remoteAddress}:${stream.remotePort}`]);
  });
}

/**
 * Calls `listener` when a Cluster loses a node, which may have been the one
 * a subscriber was subscribed on (the cluster subscribes again on another);
 * never on one server or a Sentinel set, whose reconnects say as much.
 */
export function onNodeLost(client: RedisClient, listener: () => void): void {
  if (isCluster(client)) client.on("-node", listener);
}

/**
 * `WAIT replicas waitMs` on the connection that wrote `key`: the master's,
 * or on a Cluster the one of the node serving the key's slot (a pipeline goes
 * to the node of its keyed command's slot, and WAIT rides along on that
 * connection). Resolves how many replicas acknowledged.
 */
export async function waitForReplicas(
  client: RedisClient,
  key: string,
  replicas: number,
  waitMs: number,
): Promise<number> {
  if (!isCluster(client)) return Number(await client.call("WAIT", replicas, waitMs));
  const results = (await client.pipeline().exists(key).call("WAIT", replicas, waitMs).exec()) ?? [];
  const [err, answer] = results[1] ?? [new Error("no answer to WAIT"), 0];
  if (err) throw err;
  return Number(answer);
}

/**
 * Counts the connections `client` made to the nodes it writes to (each
 * connect of one server's or a Sentinel set's client; on a Cluster each
 * node's connect, and each node added or lost), so that a caller can tell
 * whether two answers came over the same connection. `WAIT` needs it: it
 * counts the replicas that hold what its own connection wrote, and on a
 * connection made since (to a master promoted after a failover) nothing was
 * written, so it answers at once with every replica attached.
 */
export function countConnections(client: RedisClient): () => number {
  let count = 0;
  const bump = () => {
    count += 1;
  };
  if (isCluster(client)) {
    for (const node of client.nodes()) node.on("ready", bump);
    client.on("+node", (node: Redis) => {
      bump();
      node.on("ready", bump);
    });
    client.on("-node", bump);
  } else {
    client.on("ready", bump);
  }
  return () => count;
}
