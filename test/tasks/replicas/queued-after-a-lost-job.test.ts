import { slow } from "../../support/time-factor.js";
import { rm } from "node:fs/promises";
import { describe, expect, it, onTestFinished } from "vitest";
import { imagesDirOf, startPrivateRedis, uniquePrefix } from "../../support/redis.js";
import { redisCommands, type RedisAddress } from "../../support/redis-topology.js";
import { startTestApp } from "../../support/start-test-app.js";
import { getTask, submitOk, waitForStatus } from "../task-api.js";

// A task is written, then its queue job: when Redis takes the first write and refuses the second
// (a failover between them, here an ACL that drops the queue's keys), the client already has its
// 202. The task must still run once Redis takes the job, within seconds, not at the next
// minute's adoption pass.

const USER = "sidecar";
const PASSWORD = "sidecar-password";

describe("a task whose queue job could not be written", () => {
  it(
    "is queued again within seconds once Redis takes it, and completes",
    async () => {
      const redis = await startPrivateRedis();
      onTestFinished(() => redis.close());
      const { hostname, port } = new URL(redis.url);
      const admin: RedisAddress = { host: hostname, port: Number(port) };
      const acl = (...rules: string[]) =>
        redisCommands(admin, [["ACL", "SETUSER", USER, ...rules]]);
      await acl("on", `>${PASSWORD}`, "~*", "&*", "+@all");

      const prefix = uniquePrefix("lost-job");
      onTestFinished(() => rm(imagesDirOf(prefix), { recursive: true, force: true }));
      const app = await startTestApp({
        config: {
          store: { url: `redis://${USER}:${PASSWORD}@${admin.host}:${admin.port}`, prefix },
          images: { url: `file://${imagesDirOf(prefix)}` },
        },
      });
      onTestFinished(() => app.close());
      await waitForStatus(app, await submitOk(app, { prompt: "before" }), ["completed"]);

      // Every key of the deployment (`<prefix>::<name>`) but the queue's (BullMQ's, `<prefix>::bull:`).
      await acl("resetkeys", `~${prefix}::[^b]*`);
      const id = await submitOk(app, { prompt: "its job refused" });
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect((await getTask(app, id)).body.status).toBe("queued");

      await acl("~*");
      const started = performance.now();
      await waitForStatus(app, id, ["completed"], 15_000);
      // Two passes apart at most, the worker's own retry and a loaded machine: far below a minute.
      expect(performance.now() - started).toBeLessThan(15_000);
    },
    slow(40_000),
  );
});
