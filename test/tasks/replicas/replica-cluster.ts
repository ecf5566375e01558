import { leaseSec } from "../../support/time-factor.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, onTestFinished } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { REDIS_URL, deleteKeys, uniquePrefix } from "../../support/redis.js";
import { serve, writeConfig, type ServedProcess } from "../../support/serve-process.js";
import { TEST_KEYS, UPSTREAM_KEY } from "../../support/start-test-app.js";
import type { Target } from "../task-api.js";

/** A 1x1 PNG, for answers the test writes itself. */
export const PNG_B64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/*
 * Several real service processes (the built bin) on one Redis, in front of a
 * fake upstream that counts concurrent generations: what an operator running
 * replicas behind a load balancer sees. Short leases (1 s) keep recovery fast.
 */

/** The test file's working directory (configs, SQLite files) and fake upstream. */
export let dir: string;
export let upstream: FakeUpstream;

/** Gives the calling test file its directory and fake upstream, for all its tests. */
export function useReplicaEnvironment(): void {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "replicas-"));
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    await upstream.close();
    await rm(dir, { recursive: true, force: true });
  });
}

export interface ClusterOptions {
  storeUrl?: string;
  maxConcurrent?: number;
  leaseSec?: number;
  /** `null`: the service's default (`imageTasks.timeoutSec` + 30). Default 2. */
  shutdownGraceSec?: number | null;
  /** Laid over the cluster's `imageTasks` (an `undefined` field takes the service's default). */
  imageTasks?: Record<string, unknown>;
  /** The channels; default: the fake upstream, as `fake`. */
  channels?: unknown[];
  webhooks?: Record<string, unknown>;
  /** The `images` section; default: a directory every replica mounts. */
  images?: Record<string, unknown>;
}

/** A deployment's config: every replica gets the same one. */
export async function clusterConfig(options: ClusterOptions = {}): Promise<string> {
  const prefix = uniquePrefix("replicas");
  // A private Redis goes with its data; the shared one keeps nothing of the test.
  if (!options.storeUrl) {
    onTestFinished(async () => {
      await deleteKeys(prefix);
    });
  }
  return writeConfig(dir, prefix, {
    server: {
      port: 0,
      host: "127.0.0.1",
      // Idle connections kept 60 s, not 5: a test's fetch client stalled past 5 s on a loaded
      // machine would reuse a connection the replica is closing (ECONNRESET, keep-alive's race).
      keepAliveTimeoutSec: 60,
      // JSON leaves an undefined field out: the service's default then.
      shutdownGraceSec:
        options.shutdownGraceSec === null ? undefined : (options.shutdownGraceSec ?? 2),
    },
    store: { url: options.storeUrl ?? REDIS_URL, prefix },
    auth: {
      keys: [
        { key: TEST_KEYS.default, group: "default" },
        { key: TEST_KEYS.other, group: "default" },
      ],
    },
    groups: { default: { models: ["gpt-4o-mini", "gpt-image-*"] } },
    channels: options.channels ?? [
      {
        name: "fake",
        baseUrl: upstream.baseUrl,
        apiKey: UPSTREAM_KEY,
        models: ["gpt-4o-mini", "gpt-image-1"],
      },
    ],
    imageTasks: {
      maxConcurrent: options.maxConcurrent ?? 2,
      leaseSec: options.leaseSec ?? leaseSec(1),
      pollIntervalSec: 1,
      ...options.imageTasks,
    },
    // Every replica mounts the same directory, as a shared volume would be.
    images: options.images ?? { url: `file://${join(dir, `${prefix}-images`)}` },
    ...(options.webhooks ? { webhooks: options.webhooks } : {}),
  });
}

export const target = (replica: ServedProcess): Target => ({
  url: replica.url,
  key: TEST_KEYS.default,
});

export async function startReplicas(
  configFile: string,
  count: number,
  env: NodeJS.ProcessEnv = {},
): Promise<ServedProcess[]> {
  return Promise.all(Array.from({ length: count }, () => serve(configFile, dir, env)));
}

/** The JSON lines a replica (started with `LOG_LEVEL=info`) wrote with this `msg`. */
export function logLines(replica: ServedProcess, msg: string): Array<Record<string, unknown>> {
  return replica
    .stdout()
    .split("\n")
    .filter((line) => line.startsWith("{") && line.includes(`"msg":"${msg}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/**
 * A counter's value on a replica's (or an in-process app's) `/metrics`, by name (without the
 * prefix) and labels.
 */
export async function counterOf(
  replica: { url: string },
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const text = await (await fetch(`${replica.url}/metrics`)).text();
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  for (const line of text.split("\n")) {
    if (!line.startsWith(`image_task_sidecar_${name}`) || line.startsWith("#")) continue;
    const head = line.slice(0, line.lastIndexOf(" "));
    if (head !== `image_task_sidecar_${name}` && !head.startsWith(`image_task_sidecar_${name}{`)) {
      continue;
    }
    if (wanted.every((pair) => head.includes(pair)))
      return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return NaN;
}
