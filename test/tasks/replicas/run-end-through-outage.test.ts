import { slow } from "../../support/time-factor.js";
import { rm } from "node:fs/promises";
import { describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { imagesDirOf, startPrivateRedis, uniquePrefix } from "../../support/redis.js";
import { redisCommands, type RedisAddress } from "../../support/redis-topology.js";
import { startTestApp, type TestApp } from "../../support/start-test-app.js";
import { submitOk, upstreamPrompts, waitForStatus, waitUntil } from "../task-api.js";

// A run has its answer from the channel (an image, or an error) and the task store refuses to
// record its end (Redis away, failing over; here an ACL that leaves the deployment only
// BullMQ's keys, so the run keeps its lease). Once the store takes writes again the task ends
// as the channel answered: the channel is called once. Before, the run gave the task back to
// the queue, which ran it again: a second image paid for, or a second call for an error.

const USER = "sidecar";
const PASSWORD = "sidecar-password";

/** A service on a private Redis whose ACL a test can narrow to the queue's keys. */
async function appOnNarrowableRedis(): Promise<{
  app: TestApp;
  upstream: FakeUpstream;
  /** Leaves the service only BullMQ's keys for `ms`, then all of them again. */
  narrow(ms: number): Promise<void>;
}> {
  const [redis, upstream] = await Promise.all([startPrivateRedis(), startFakeUpstream()]);
  onTestFinished(async () => {
    await Promise.all([redis.close(), upstream.close()]);
  });
  const { hostname, port } = new URL(redis.url);
  const admin: RedisAddress = { host: hostname, port: Number(port) };
  const acl = (...rules: string[]) => redisCommands(admin, [["ACL", "SETUSER", USER, ...rules]]);
  await acl("on", `>${PASSWORD}`, "~*", "&*", "+@all");

  const prefix = uniquePrefix("run-end-outage");
  onTestFinished(() => rm(imagesDirOf(prefix), { recursive: true, force: true }));
  const app = await startTestApp({
    upstream,
    config: {
      store: { url: `redis://${USER}:${PASSWORD}@${admin.host}:${admin.port}`, prefix },
      images: { url: `file://${imagesDirOf(prefix)}` },
    },
  });
  onTestFinished(() => app.close());
  const narrow = async (ms: number) => {
    await acl("resetkeys", `~${prefix}::bull:*`);
    await new Promise((resolve) => setTimeout(resolve, ms));
    await acl("~*");
  };
  return { app, upstream, narrow };
}

/** Past when a second run would have called the channel (the queue's retry in 1 to 4 s). */
const pastRetry = () => new Promise((resolve) => setTimeout(resolve, slow(5_000)));

describe("a run's end while the task store refuses writes", () => {
  it(
    "a completion is written once the store is back: completed, one generation",
    async () => {
      const { app, upstream, narrow } = await appOnNarrowableRedis();
      upstream.behave("images", { kind: "ok", delayMs: 1_000 });
      const prompt = "kept through the outage";
      const id = await submitOk(app, { prompt });
      await waitUntil(() => upstreamPrompts(upstream).includes(prompt), "the channel call");

      // Only the queue's keys while the channel answers, and a while after.
      await narrow(3_000);

      const done = await waitForStatus(app, id, ["completed", "failed"], 20_000);
      expect(done.body.status, done.text).toBe("completed");
      await pastRetry();
      expect(upstreamPrompts(upstream).filter((p) => p === prompt)).toHaveLength(1);
    },
    slow(60_000),
  );

  it(
    "a failure is written once the store is back: failed with the channel's error, one call",
    async () => {
      const { app, upstream, narrow } = await appOnNarrowableRedis();
      upstream.behave("images", {
        kind: "custom",
        respond: async (_req, res) => {
          await new Promise((resolve) => setTimeout(resolve, 1_000));
          res.writeHead(400, { "content-type": "application/json" });
          res.end(
            JSON.stringify({
              error: {
                message: "Your request was rejected by the safety system.",
                type: "invalid_request_error",
                code: "moderation_blocked",
              },
            }),
          );
        },
      });
      const prompt = "refused through the outage";
      const id = await submitOk(app, { prompt });
      await waitUntil(() => upstreamPrompts(upstream).includes(prompt), "the channel call");

      await narrow(3_000);

      const done = await waitForStatus(app, id, ["completed", "failed"], 20_000);
      expect(done.body.status, done.text).toBe("failed");
      expect(done.body.error?.code, done.text).toBe("moderation_blocked");
      await pastRetry();
      expect(upstreamPrompts(upstream).filter((p) => p === prompt)).toHaveLength(1);
    },
    slow(60_000),
  );
});
