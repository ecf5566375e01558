import { slow } from "../../support/time-factor.js";
import { readFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { createClient } from "@keyv/redis";
import { describe, expect, it } from "vitest";
import { REDIS_URL } from "../../support/redis.js";
import { getTask, submitOk, waitForStatus, waitUntil } from "../task-api.js";
import {
  clusterConfig,
  counterOf,
  logLines,
  PNG_B64,
  startReplicas,
  target,
  upstream,
  useReplicaEnvironment,
} from "./replica-cluster.js";

/*
 * A rollout that loses nothing, on a channel whose call is held open: a
 * replica that stops keeps its generations to their end (each reaches the
 * channel once); only one that dies has its generation run again (counted,
 * logged); and a live replica keeps its leases through a long stall.
 */

useReplicaEnvironment();

const INFO = { LOG_LEVEL: "info" };

/** Answers a generation only once `released` resolves. */
function heldImages(released: Promise<void>) {
  return async (_req: unknown, res: ServerResponse) => {
    await released;
    if (res.destroyed) return;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ created: 1, data: [{ b64_json: PNG_B64 }] }));
  };
}

/** The lowest time to live `key` had, read every 100 ms for `forMs`. */
async function lowestTtlMs(key: string, forMs: number): Promise<number> {
  const client = createClient({ url: REDIS_URL });
  await client.connect();
  try {
    let lowest = Infinity;
    for (const until = Date.now() + forMs; Date.now() < until;) {
      const ttl = await client.pTTL(key);
      if (ttl >= 0) lowest = Math.min(lowest, ttl);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return lowest;
  } finally {
    await client.close();
  }
}

describe("draining keeps paid work", () => {
  it(
    "SIGTERM: the generations in flight run to their end, each reaches the channel once, then the replica exits",
    async () => {
      upstream.reset();
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      upstream.behave("images", { kind: "custom", respond: heldImages(released) });
      // The default grace (timeoutSec + 30); a lease long enough for a loaded machine.
      const configFile = await clusterConfig({
        maxConcurrent: 2,
        leaseSec: 10,
        shutdownGraceSec: null,
        imageTasks: { timeoutSec: 60 },
      });
      const [leaving] = await startReplicas(configFile, 1, INFO);
      const ids = [
        await submitOk(target(leaving!), { prompt: "drain 0" }),
        await submitOk(target(leaving!), { prompt: "drain 1" }),
      ];
      await waitUntil(() => upstream.inFlight === 2, "two generations in flight", 20_000);
      const [staying] = await startReplicas(configFile, 1);

      leaving!.child.kill("SIGTERM");
      setTimeout(() => leaving!.child.kill("SIGTERM"), 100);
      // Still draining while the channel works: the replica waits for its generations.
      await new Promise((resolve) => setTimeout(resolve, 2000));
      expect(leaving!.child.exitCode).toBeNull();
      release();
      expect(await leaving!.exited).toBe(0);
      // Done when it exited: completed by the replica that ran them, not run again elsewhere.
      for (const id of ids) {
        const task = await getTask(target(staying!), id);
        expect(task.body.status, task.text).toBe("completed");
      }
      const generations = upstream.requests.filter((r) => r.path.endsWith("/images/generations"));
      expect(generations).toHaveLength(2);
      expect(upstream.aborted).toBe(0);
      expect(logLines(leaving!, "task.rerun")).toHaveLength(0);
      expect(logLines(leaving!, "task.completed")).toHaveLength(2);
    },
    slow(90_000),
  );

  it(
    "SIGKILL mid-generation: the generation runs again elsewhere, counted and logged",
    async () => {
      upstream.reset();
      upstream.behave("images", { kind: "hang" });
      const configFile = await clusterConfig({ maxConcurrent: 2, leaseSec: 3 });
      const [doomed] = await startReplicas(configFile, 1);
      const id = await submitOk(target(doomed!), { prompt: "killed" });
      await waitUntil(() => upstream.inFlight === 1, "the generation in flight", 20_000);
      const [survivor] = await startReplicas(configFile, 1, INFO);
      doomed!.child.kill("SIGKILL");
      await doomed!.exited;
      upstream.behave("images", { kind: "ok", delayMs: 100 });

      const done = await waitForStatus(target(survivor!), id, ["completed", "failed"], 60_000);
      expect(done.body.status, done.text).toBe("completed");
      // Log lines reach stdout within half a second.
      await waitUntil(() => logLines(survivor!, "task.rerun").length > 0, "the task.rerun line");
      const [rerun] = logLines(survivor!, "task.rerun");
      expect(rerun).toMatchObject({ task_id: id, attempt: 2, reason: "lost" });
      expect(await counterOf(survivor!, "task_reruns_total", { reason: "lost" })).toBe(1);
      expect(await counterOf(survivor!, "task_reruns_total", { reason: "grace" })).toBe(0);
      expect(upstream.maxInFlightPerPrompt).toBe(1);
    },
    slow(90_000),
  );

  it(
    "a live replica whose event loop stalls (SIGSTOP, 20 s) keeps its lease at the default leaseSec",
    async () => {
      upstream.reset();
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      upstream.behave("images", { kind: "custom", respond: heldImages(released) });
      // imageTasks.leaseSec left to its default (30 s).
      const configFile = await clusterConfig({
        maxConcurrent: 2,
        imageTasks: { leaseSec: undefined },
      });
      const [holder] = await startReplicas(configFile, 1);
      const id = await submitOk(target(holder!), { prompt: "stalled" });
      await waitUntil(() => upstream.inFlight === 1, "the generation in flight", 20_000);
      const [other] = await startReplicas(configFile, 1);

      // Renewed every 1/12 to 1/6 of the lease: its lock never has less than 5/6 of it left
      // (BullMQ's own default, every 1/4 to 1/2, lets it fall to half).
      const prefix = (
        JSON.parse(await readFile(configFile, "utf8")) as { store: { prefix: string } }
      ).store.prefix;
      const lowest = await lowestTtlMs(`${prefix}::bull:image-tasks:${id}:lock`, 10_000);
      expect(lowest).toBeGreaterThan(19_000);

      holder!.child.kill("SIGSTOP");
      await new Promise((resolve) => setTimeout(resolve, 20_000));
      holder!.child.kill("SIGCONT");
      // Back: it renews its lock at once; a lost lease would cut its call to the channel.
      await new Promise((resolve) => setTimeout(resolve, 3000));
      expect(upstream.aborted).toBe(0);
      release();
      const done = await waitForStatus(target(other!), id, ["completed", "failed"], 30_000);
      expect(done.body.status, done.text).toBe("completed");
      const generations = upstream.requests.filter((r) => r.path.endsWith("/images/generations"));
      expect(generations).toHaveLength(1);
    },
    slow(120_000),
  );
});
