import type { RedisTopology } from "../config/schema/redis-topology.js";
import { deploymentKeyPrefix } from "./redis-topologies.js";

/*
 * Every key and channel a deployment on Redis uses, named here and nowhere
 * else (as BullMQ's QueueKeys names a queue's): built once from `store.prefix`
 * and the topology, and handed to each part (the store, its scripts, the task
 * queue, the webhook queue, the bus, the key-value entries, the upgrade step).
 * The layout is the one earlier releases wrote: a deployment that upgrades
 * finds its keys where they were. On a Cluster the prefix is a hash tag, so
 * every key below sits in one slot (see `deploymentKeyPrefix`).
 */

/** The task store's keys: records, idempotency keys, meta values and the indexes. */
export interface RedisStoreKeys {
  /** `task:<id>`: a record (Keyv's `{"value", "expires"}` JSON), with its TTL. */
  task(id: string): string;
  /** `idem:<owner>:<key>`: the task an idempotency key made, and the body's fingerprint. */
  idempotency(owner: string, key: string): string;
  /** `idem:none`: a stand-in, never written, for a script given no idempotency key. */
  noIdempotency: string;
  /** `meta:<name>`: a value set once for all replicas (the URL signing secret). */
  meta(name: string): string;
  /** `sequence`: the counter that orders the indexes. */
  sequence: string;
  /** `owner:<owner>`: an owner's tasks, by creation. */
  owner(owner: string): string;
  /** `owned:<status>:<owner>`: the same, in one status (the task list). */
  owned(status: string, owner: string): string;
  /** `unfinished`: tasks that must have a place in the queue. */
  unfinished: string;
  /** `expiring`: finished tasks (`<id>|<owner>`) by expiry time. */
  expiring: string;
  /** `expiring-images`: the image store keys of finished tasks, by expiry time. */
  expiringImages: string;
  /** `webhook-outbox`: finished tasks whose webhook event is not queued yet. */
  webhookOutbox: string;
}

/** A BullMQ queue's name and the prefix of its keys (`<prefix>:<name>:*`). */
export interface BullmqQueueKeys {
  prefix: string;
  name: string;
}

/** The task queue's admission ledger, beside BullMQ's keys. */
export interface RedisAdmissionKeys {
  /** `admission:waiting`: every task admitted and not started. */
  waiting: string;
  /** `admission:waiting:<owner>`: the same, per owner. */
  ownerWaiting(owner: string): string;
  /** `admission:running`: the tasks running. */
  running: string;
}

/** The bus's pub/sub channels. */
export interface RedisEventChannels {
  /** `events`: every cancel. */
  cancels: string;
  /** `task:<id>`: one task's stages. */
  task(id: string): string;
}

/** Where a Keyv namespace's entries live (`<prefix>-<namespace>::<Keyv's own key>`). */
export interface RedisKeyValueKeys {
  /** The namespace Keyv is given (it prefixes its keys with `<namespace>:`). */
  namespace: string;
  /** The Redis key of Keyv's key. */
  key(keyvKey: string): string;
}

/** Where background responses' stream events are logged (see `ResponseEventLog`). */
export interface RedisResponseEventKeys {
  /** `response-events:<id>`: a response's events, oldest first, a capped list with a TTL. */
  log(id: string): string;
}

/** What releases before the image store wrote beside the records: image bytes. */
export interface RedisLegacyKeys {
  /** `image:<id>:<n>` (a result) and `input:<id>:<n>` (an edit's input). */
  bytes(kind: "image" | "input", id: string, index: number): string;
  /** The SCAN pattern that matches every such key of `kind`. */
  bytesPattern(kind: "image" | "input"): string;
  /** The task id in such a key; undefined for any other key. */
  taskOfBytes(key: string): string | undefined;
}

/** Every key of a deployment, by the part that uses it. */
export interface RedisKeys {
  /** What every key starts with: `store.prefix`, in a hash tag on a Cluster. */
  prefix: string;
  store: RedisStoreKeys;
  /** BullMQ's queue of image tasks: `bull:image-tasks:*`. */
  taskQueue: BullmqQueueKeys;
  admission: RedisAdmissionKeys;
  /** BullMQ's queue of webhook deliveries: `bull:webhooks:*`. */
  webhookQueue: BullmqQueueKeys;
  events: RedisEventChannels;
  responseEvents: RedisResponseEventKeys;
  /** A Keyv namespace's entries (the Responses objects' owners: `responses`). */
  keyValue(namespace: string): RedisKeyValueKeys;
  legacy: RedisLegacyKeys;
}

/** The keys of the deployment on `store.prefix` and `topology`. */
export function redisKeys(storePrefix: string, topology: RedisTopology): RedisKeys {
  const prefix = deploymentKeyPrefix(storePrefix, topology);
  const base = `${prefix}::`;
  const bull = `${base}bull`;
  const legacyBytes = new RegExp(`^${escapeRegExp(base)}(?:image|input):(.+):\\d+$`);
  return {
    prefix,
    store: {
      task: (id) => `${base}task:${id}`,
      idempotency: (owner, key) => `${base}idem:${owner}:${key}`,
      noIdempotency: `${base}idem:none`,
      meta: (name) => `${base}meta:${name}`,
      sequence: `${base}sequence`,
      owner: (owner) => `${base}owner:${owner}`,
      owned: (status, owner) => `${base}owned:${status}:${owner}`,
      unfinished: `${base}unfinished`,
      expiring: `${base}expiring`,
      expiringImages: `${base}expiring-images`,
      webhookOutbox: `${base}webhook-outbox`,
    },
    taskQueue: { prefix: bull, name: "image-tasks" },
    admission: {
      waiting: `${base}admission:waiting`,
      ownerWaiting: (owner) => `${base}admission:waiting:${owner}`,
      running: `${base}admission:running`,
    },
    webhookQueue: { prefix: bull, name: "webhooks" },
    events: {
      cancels: `${base}events`,
      task: (id) => `${base}task:${id}`,
    },
    responseEvents: { log: (id) => `${base}response-events:${id}` },
    keyValue(namespace) {
      const spaced = `${prefix}-${namespace}`;
      return { namespace: spaced, key: (keyvKey) => `${spaced}::${keyvKey}` };
    },
    legacy: {
      bytes: (kind, id, index) => `${base}${kind}:${id}:${index}`,
      bytesPattern: (kind) => `${base}${kind}:*`,
      taskOfBytes: (key) => legacyBytes.exec(key)?.[1],
    },
  };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
