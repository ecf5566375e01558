import { createClient } from "@keyv/redis";
import { expect, onTestFinished } from "vitest";
import { REDIS_URL, deleteKeys, listKeys, uniquePrefix } from "../../support/redis.js";
import { startFakeUpstream } from "../../support/fake-upstream.js";
import type { TestApp, TestAppOptions } from "../../support/start-test-app.js";
import { slow } from "../../support/time-factor.js";
import { upstreamPrompts, useApp } from "../task-api.js";

/*
 * What the tests of a lapsed lease share (lease-lapsed-*.test.ts): the lapse itself (the queue's
 * lock taken from Redis), replicas on a prefix of their own, and the check that the channel was
 * called once. Two files, so that their waits (each a lease or more, stretched on a loaded
 * machine) run side by side.
 */

/** Takes the running task's queue lock from Redis, as a lease that lapsed leaves it. */
export async function dropLock(app: TestApp): Promise<void> {
  const locks = (await listKeys(app.config.store.prefix)).filter((key) => key.endsWith(":lock"));
  expect(locks).toHaveLength(1);
  const client = createClient({ url: REDIS_URL });
  await client.connect();
  try {
    expect(await client.del(locks[0]!)).toBe(1);
  } finally {
    await client.close();
  }
}

/** The keys of the alive mark of a task's first run, under a replicas' prefix. */
export async function marksOf(prefix: string, id: string): Promise<string[]> {
  return (await listKeys(prefix)).filter((key) => key.endsWith(`unleased-runs:${id}:1`));
}

/**
 * Replicas on a prefix of the test's own, in front of one fake channel: one task at a time each
 * (the replica still running a task cannot take its job again), a rerun's first grace 1 s + 3 s.
 */
export async function useReplicas(label: string, lease: number) {
  const prefix = uniquePrefix(label);
  onTestFinished(async () => {
    await deleteKeys(prefix);
  });
  const upstream = await startFakeUpstream();
  onTestFinished(() => upstream.close());
  const replica = {
    upstream,
    redis: { prefix },
    imageTasks: { leaseSec: lease, maxConcurrent: 1 },
    config: { store: { url: REDIS_URL, prefix, commandTimeoutSec: 1 } },
  };
  return {
    prefix,
    upstream,
    start: (more: TestAppOptions = {}) => useApp({ ...replica, ...more }),
  };
}

/** The channel was called once for `prompt`, and no rerun was counted. */
export async function expectOneGeneration(app: TestApp, prompt: string): Promise<void> {
  // Past a second run's call, had the next lease run the task again.
  await new Promise((resolve) => setTimeout(resolve, slow(3_000)));
  expect(upstreamPrompts(app.upstream).filter((p) => p === prompt)).toHaveLength(1);
  const text = await (await fetch(`${app.url}/metrics`)).text();
  expect(text).toMatch(/^image_task_sidecar_task_reruns_total\{reason="lost"\} 0$/m);
}
