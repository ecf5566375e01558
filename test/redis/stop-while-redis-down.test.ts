import { slow, leaseSec } from "../support/time-factor.js";
import { rm } from "node:fs/promises";
import { describe, expect, it, onTestFinished } from "vitest";
import { imagesDirOf, startPrivateRedis, uniquePrefix } from "../support/redis.js";
import { startTestApp } from "../support/start-test-app.js";
import { submitOk, waitForStatus } from "../tasks/task-api.js";

// A replica told to stop while its Redis is away (down, or mid-failover) must still stop: an
// orchestrator waits for it, and a stop that hangs is a pod stuck in Terminating. BullMQ's
// worker close waits for its blocking connection's `end`, which ioredis never emits for a
// connection between two reconnect attempts: the service bounds that wait.

/** What the stop may take: the grace (0.5 s), the bound on BullMQ's close, a loaded machine. */
const STOPS_WITHIN_MS = 12_000;

describe("stopping while Redis is down", () => {
  it(
    "ends within a few seconds, with the worker connections between reconnect attempts",
    async () => {
      const redis = await startPrivateRedis();
      onTestFinished(() => redis.close());
      const prefix = uniquePrefix("stop-down");
      onTestFinished(() => rm(imagesDirOf(prefix), { recursive: true, force: true }));
      const app = await startTestApp({
        imageTasks: { leaseSec: leaseSec(2) },
        config: {
          store: { url: redis.url, prefix, commandTimeoutSec: 1 },
          images: { url: `file://${imagesDirOf(prefix)}` },
        },
      });
      let closed = false;
      onTestFinished(async () => {
        if (!closed) await app.close();
      });
      // The workers are up and have taken a task: their blocking connections are in use.
      const id = await submitOk(app, { prompt: "before the outage" });
      await waitForStatus(app, id, ["completed"]);

      await redis.stop();
      // Reconnects back off to 2 s apart: most of the time a connection waits between attempts.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const started = performance.now();
      const stopped = app.close().then(() => (closed = true));
      const outcome = await Promise.race([
        stopped.then(() => "stopped"),
        new Promise((resolve) => setTimeout(() => resolve("still stopping"), STOPS_WITHIN_MS)),
      ]);
      expect(outcome).toBe("stopped");
      expect(performance.now() - started).toBeLessThan(STOPS_WITHIN_MS);
    },
    slow(40_000),
  );
});
