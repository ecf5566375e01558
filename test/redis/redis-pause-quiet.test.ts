import { slow } from "../support/time-factor.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient } from "@keyv/redis";
import { describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream } from "../support/fake-upstream.js";
import { startPrivateRedis } from "../support/redis.js";
import { serve, writeConfig } from "../support/serve-process.js";
import { TEST_KEYS, UPSTREAM_KEY } from "../support/start-test-app.js";

/*
 * Redis paused (SIGSTOP, as a stalled node or a long fork is), then back: the
 * service's connections (the store's, the queues' workers and their blocking
 * reads, webhooks, pub/sub) are healthy again within 10 s, and stay so: no
 * connection is cut and opened again in a loop, no warning repeats. Before,
 * the command deadlines and BullMQ's own watchdog both reset the workers'
 * blocking connections, each undoing the other, every few seconds for as
 * long as the process ran.
 */
describe("Redis back after a pause", () => {
  it(
    "is quiet again within 10 s: no reconnect loop, no repeated warning",
    async () => {
      const redis = await startPrivateRedis();
      const dir = await mkdtemp(join(tmpdir(), "redis-pause-"));
      const upstream = await startFakeUpstream();
      onTestFinished(async () => {
        await upstream.close();
        await redis.close();
        await rm(dir, { recursive: true, force: true });
      });
      const config = await writeConfig(dir, "pause", {
        server: { port: 0, host: "127.0.0.1" },
        store: { url: redis.url, prefix: "pause" },
        auth: { keys: [{ key: TEST_KEYS.default, group: "default" }] },
        groups: { default: { models: ["*"] } },
        channels: [
          {
            name: "fake",
            baseUrl: upstream.baseUrl,
            apiKey: UPSTREAM_KEY,
            models: ["gpt-image-1"],
          },
        ],
        images: { url: `file://${join(dir, "images")}` },
      });
      // Two replicas: their workers block on the same queues, as in a deployment.
      const replicas = await Promise.all([serve(config, dir), serve(config, dir)]);
      onTestFinished(async () => {
        for (const replica of replicas) replica.child.kill("SIGTERM");
        await Promise.all(replicas.map((replica) => replica.exited));
      });
      const probe = createClient({ url: redis.url });
      await probe.connect();
      onTestFinished(() => probe.destroy());
      const connectionsMade = async () =>
        Number(/total_connections_received:(\d+)/.exec(await probe.info("stats"))?.[1]);

      // Longer than the command deadline (5 s) and BullMQ's blocking-read watchdog (6 s). Not
      // shorter: with the fix undone (blocking reads under the command deadlines again), a 15 s
      // pause and 12 s watched after the first 10 passed; these find the loop (70 against 54
      // connections).
      redis.pause();
      await sleep(25_000);
      redis.resume();
      await sleep(10_000);
      const settled = replicas.map((replica) => replica.stdout().length);
      const made = await connectionsMade();
      await sleep(20_000);

      for (const replica of replicas) {
        const ready = (await (await fetch(`${replica.url}/readyz`)).json()) as { status: string };
        expect(ready.status).toBe("ready");
      }
      expect(await connectionsMade(), "connections made after the first 10 s").toBe(made);
      const later = replicas
        .flatMap((replica, index) => replica.stdout().slice(settled[index]).split("\n"))
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as { level: number; msg: string })
        .filter((line) => line.level >= 40);
      expect(later.map((line) => line.msg)).toEqual([]);
    },
    slow(120_000),
  );
});
