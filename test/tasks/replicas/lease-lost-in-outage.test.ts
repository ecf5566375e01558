import { leaseSec, slow } from "../../support/time-factor.js";
import { rm } from "node:fs/promises";
import { describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream } from "../../support/fake-upstream.js";
import { imagesDirOf, startPrivateRedis, uniquePrefix } from "../../support/redis.js";
import { redisCommands, type RedisAddress } from "../../support/redis-topology.js";
import { startTestApp } from "../../support/start-test-app.js";
import { submitOk, upstreamPrompts, waitForStatus, waitUntil } from "../task-api.js";

// A store outage longer than the lease (a Sentinel failover takes 30 s and more with its
// defaults; the lease is 30 s) keeps a live run from renewing its lease: once the store is back
// the queue hands the task to another replica's run, while the first holds its image and is
// writing the task's end again. Here replica A loses the store (an ACL takes every key from its
// user) while its channel call runs, for longer than its lease; replica B keeps it. The task
// completes with A's image: the channel is called once. Before, B's rerun claimed the task at
// once, called the channel again and A's completion was refused.

const PASSWORD = "replica-password";

describe("a lease lost in a store outage while its run lives", () => {
  it(
    "the rerun on another replica leaves the first run time to write its end: one generation",
    async () => {
      const [redis, upstream] = await Promise.all([startPrivateRedis(), startFakeUpstream()]);
      onTestFinished(async () => {
        await Promise.all([redis.close(), upstream.close()]);
      });
      const { hostname, port } = new URL(redis.url);
      const admin: RedisAddress = { host: hostname, port: Number(port) };
      const acl = (user: string, ...rules: string[]) =>
        redisCommands(admin, [["ACL", "SETUSER", user, ...rules]]);
      await acl("replica-a", "on", `>${PASSWORD}`, "~*", "&*", "+@all");
      await acl("replica-b", "on", `>${PASSWORD}`, "~*", "&*", "+@all");

      // A's outage lasts three leases; B's queue takes the job after one or two, then waits
      // its grace (store.commandTimeoutSec + 3 s) before it reads the task again. The grace must
      // outlast the rest of the outage whatever this run's time factor: with a fixed 2 s timeout
      // a loaded run (lease 3 s, outage 9 s) had B read the task before A's store came back.
      const outageMs = leaseSec(2) * 3_000;
      const prefix = uniquePrefix("lease-outage");
      onTestFinished(() => rm(imagesDirOf(prefix), { recursive: true, force: true }));
      const replica = async (user: string) => {
        const app = await startTestApp({
          upstream,
          imageTasks: { leaseSec: leaseSec(2) },
          config: {
            store: {
              url: `redis://${user}:${PASSWORD}@${admin.host}:${admin.port}`,
              prefix,
              commandTimeoutSec: outageMs / 1000,
            },
            images: { url: `file://${imagesDirOf(prefix)}` },
          },
        });
        onTestFinished(() => app.close());
        return app;
      };
      const a = await replica("replica-a");
      upstream.behave("images", { kind: "ok", delayMs: 1_000 });
      const prompt = "made once through the outage";
      const id = await submitOk(a, { prompt });
      await waitUntil(() => upstreamPrompts(upstream).includes(prompt), "replica a's call");
      const b = await replica("replica-b");

      // A loses every key for three leases: its lease lapses, B's queue worker takes the job.
      await acl("replica-a", "resetkeys");
      await new Promise((resolve) => setTimeout(resolve, outageMs));
      await acl("replica-a", "~*");

      const done = await waitForStatus(b, id, ["completed", "failed"], 30_000);
      expect(done.body.status, done.text).toBe("completed");
      // Past a second run's call, had B's rerun gone on.
      await new Promise((resolve) => setTimeout(resolve, slow(3_000)));
      expect(upstreamPrompts(upstream).filter((p) => p === prompt)).toHaveLength(1);
    },
    slow(90_000),
  );
});
