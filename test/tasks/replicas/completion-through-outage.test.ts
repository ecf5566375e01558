import { slow } from "../../support/time-factor.js";
import { rm } from "node:fs/promises";
import { describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream } from "../../support/fake-upstream.js";
import { imagesDirOf, startPrivateRedis, uniquePrefix } from "../../support/redis.js";
import { redisCommands, type RedisAddress } from "../../support/redis-topology.js";
import { startTestApp } from "../../support/start-test-app.js";
import { submitOk, upstreamPrompts, waitForStatus, waitUntil } from "../task-api.js";

// A run has its image and the task store refuses to record it (Redis away, failing over; here
// an ACL that leaves the deployment only BullMQ's keys, so the run keeps its lease). Once the
// store takes writes again the task completes with that image: the channel is called once.
// Before, the run gave the task back to the queue, which ran it again and paid twice.

const USER = "sidecar";
const PASSWORD = "sidecar-password";

describe("a run's completion while the task store refuses writes", () => {
  it(
    "is written once the store is back: completed, one generation",
    async () => {
      const [redis, upstream] = await Promise.all([startPrivateRedis(), startFakeUpstream()]);
      onTestFinished(async () => {
        await Promise.all([redis.close(), upstream.close()]);
      });
      const { hostname, port } = new URL(redis.url);
      const admin: RedisAddress = { host: hostname, port: Number(port) };
      const acl = (...rules: string[]) =>
        redisCommands(admin, [["ACL", "SETUSER", USER, ...rules]]);
      await acl("on", `>${PASSWORD}`, "~*", "&*", "+@all");

      const prefix = uniquePrefix("completion-outage");
      onTestFinished(() => rm(imagesDirOf(prefix), { recursive: true, force: true }));
      const app = await startTestApp({
        upstream,
        config: {
          store: { url: `redis://${USER}:${PASSWORD}@${admin.host}:${admin.port}`, prefix },
          images: { url: `file://${imagesDirOf(prefix)}` },
        },
      });
      onTestFinished(() => app.close());
      upstream.behave("images", { kind: "ok", delayMs: 1_000 });
      const prompt = "kept through the outage";
      const id = await submitOk(app, { prompt });
      await waitUntil(() => upstreamPrompts(upstream).includes(prompt), "the channel call");

      // Only the queue's keys (`<prefix>::bull:`) while the channel answers, and a while after.
      await acl("resetkeys", `~${prefix}::bull:*`);
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      await acl("~*");

      const done = await waitForStatus(app, id, ["completed", "failed"], 20_000);
      expect(done.body.status, done.text).toBe("completed");
      // Past when a second run would have called the channel (the queue's retry in 1 to 4 s).
      await new Promise((resolve) => setTimeout(resolve, slow(5_000)));
      expect(upstreamPrompts(upstream).filter((p) => p === prompt)).toHaveLength(1);
    },
    slow(60_000),
  );
});
