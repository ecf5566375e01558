import { mkdtempSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, onTestFinished } from "vitest";
import { openTaskBackend, type TaskBackend } from "../../../src/tasks/open-task-backend.js";
import type { TaskStore } from "../../../src/tasks/core/task-store.js";
import { newTaskId, type TaskRecord } from "../../../src/tasks/core/task-record.js";
import { REDIS_URL, deleteKeys, uniquePrefix } from "../../support/redis.js";
import { useFileTopologies } from "../../support/redis-topologies.js";
import { testConfig } from "../../support/start-test-app.js";

// What the store conformance suite (task-store.*.conformance.test.ts, one file per subject)
// shares: every backend, opened the way the service opens it, and a task record to write.

/** A backend of the conformance suite. */
export interface StoreBackend {
  name: string;
  /** A fresh place for a store: a new SQLite file, or a new prefix on the shared Redis. */
  url: () => string;
  persistent: boolean;
}

/**
 * Every backend the service can run on: Redis as one server, a Sentinel set and a Cluster
 * (the two started for the file). Call at a test file's top level: the SQLite files live in a
 * directory of the file's own, removed after its tests.
 */
export function storeBackends(): StoreBackend[] {
  let dir: string | undefined;
  let dbCount = 0;
  afterAll(() => (dir ? rm(dir, { recursive: true, force: true }) : undefined));
  const sqliteUrl = () => {
    dir ??= mkdtempSync(join(tmpdir(), "task-store-"));
    return `sqlite://${join(dir, `store-${++dbCount}.db`)}`;
  };
  return [
    { name: "memory", url: () => "memory://", persistent: false },
    { name: "sqlite", url: sqliteUrl, persistent: true },
    { name: "redis", url: () => `${REDIS_URL}#${uniquePrefix("store")}`, persistent: true },
    ...topologyBackends(),
  ];
}

/** The store on the file's Sentinel set and Cluster (each test on a prefix of its own). */
function topologyBackends(): StoreBackend[] {
  const topologies = useFileTopologies();
  return [
    {
      name: "redis-sentinel",
      url: () => `${topologies.sentinelUrl()}#${uniquePrefix("store")}`,
      persistent: true,
    },
    {
      name: "redis-cluster",
      url: () => `${topologies.clusterUrl()}#${uniquePrefix("store")}`,
      persistent: true,
    },
  ];
}

/**
 * Opens the backend at `place` (default a fresh one of the backend) the way the service
 * opens it, closed (and its Redis keys deleted) when the test ends. Opening a place again is
 * a restart.
 */
export function backendOpener(url: () => string) {
  return async function open(place = url()): Promise<TaskBackend> {
    const [storeUrl, prefix] = place.split("#") as [string, string | undefined];
    const config = testConfig("http://127.0.0.1:9/v1", {
      storeUrl,
      config: prefix ? { store: { url: storeUrl, prefix } } : {},
    });
    const backend = await openTaskBackend(config, pino({ level: "silent" }));
    onTestFinished(async () => {
      await backend.close().catch(() => undefined);
      // The topologies are stopped with their keys after the file.
      if (prefix && storeUrl.startsWith("redis://")) await deleteKeys(prefix);
    });
    return backend;
  };
}

/** {@link backendOpener}'s store. */
export function storeOpener(url: () => string) {
  const openBackend = backendOpener(url);
  return async (place?: string): Promise<TaskStore> => (await openBackend(place)).store;
}

/** A queued task of `key:owner-a`, new id each call. */
export function record(overrides: Partial<TaskRecord> = {}): TaskRecord {
  return {
    id: newTaskId(),
    owner: "key:owner-a",
    status: "queued",
    model: "gpt-image-1",
    request: { model: "gpt-image-1", prompt: "a test", n: 1 },
    responseFormat: "b64_json",
    created: 1_700_000_000,
    attempts: 0,
    ...overrides,
  };
}
