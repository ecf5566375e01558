import { leaseSec, slowSec } from "../../support/time-factor.js";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import {
  REDIS_URL,
  deleteKeys,
  listKeys,
  startPrivateRedis,
  uniquePrefix,
} from "../../support/redis.js";
import { serve, spawnServe, writeConfig } from "../../support/serve-process.js";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { TINY_PNG_B64 } from "../../support/fake-answers.js";
import { sendJson } from "../../support/fake-http.js";
import {
  call,
  expectError,
  getTask,
  submit,
  submitOk,
  upstreamPrompts,
  waitForStatus,
  waitUntil,
} from "../task-api.js";
import {
  useReplicaEnvironment,
  dir,
  upstream,
  clusterConfig,
  startReplicas,
  target,
} from "./replica-cluster.js";
// Replicas on one Redis (see replica-cluster.ts); the scenarios are split over files to run side by side.

useReplicaEnvironment();

describe("Redis going away", () => {
  it("crashes nothing: task routes answer 503, /readyz degraded, passthrough works, and everything recovers", async () => {
    const redis = await startPrivateRedis();
    onTestFinished(() => redis.close());
    upstream.reset();
    upstream.behave("images", { kind: "ok", delayMs: 1000 });
    const replicas = (
      await startReplicas(await clusterConfig({ storeUrl: redis.url, leaseSec: leaseSec(1) }), 2)
    ).map(target);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push(await submitOk(replicas[i % 2]!, { prompt: `outage ${i}` }));
    await waitUntil(() => upstream.inFlight === 2, "two running tasks");

    await redis.stop();
    const readiness = async (replica: { url: string }) => {
      const answer = await fetch(`${replica.url}/readyz`);
      // Never 503 for a store: passthrough still works on every replica.
      expect(answer.status).toBe(200);
      return ((await answer.json()) as { status: string }).status;
    };
    for (const replica of replicas) {
      expect((await fetch(`${replica.url}/healthz`)).status).toBe(200);
      expectError(await getTask(replica, ids[0]!), 503, "store_unavailable");
      expectError(await submit(replica, { prompt: "while away" }), 503, "store_unavailable");
      await waitUntil(async () => (await readiness(replica)) === "degraded", "degraded");
      const chat = await call(replica, "POST", "/v1/chat/completions", {
        json: { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] },
      });
      expect(chat.status, chat.text).toBe(200);
    }
    // The runs end while Redis is away: their results cannot be written yet.
    await waitUntil(() => upstream.inFlight === 0, "the running generations to end");

    await redis.start();
    for (const replica of replicas) {
      await waitUntil(
        async () => (await readiness(replica)) === "ready",
        "the replica to be ready again",
      );
    }
    for (const id of ids) {
      const done = await waitForStatus(replicas[1]!, id, ["completed", "failed"], 30_000);
      expect(done.body.status, done.text).toBe("completed");
    }
    const after = await submitOk(replicas[0]!, { prompt: "after the outage" });
    expect((await waitForStatus(replicas[1]!, after, ["completed", "failed"])).body.status).toBe(
      "completed",
    );
    expect(upstream.maxInFlightPerPrompt).toBe(1);
  });

  it("leaves nothing behind once tasks expire: the deployment's keys go back to their baseline", async () => {
    upstream.reset();
    // The channel holds the generations until every task is in: with a retention of one second,
    // a task that ended while a loaded machine was still submitting the others could expire
    // before the test first saw it, or before it counted the tasks' keys.
    let release = (): void => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    upstream.behave("images", {
      kind: "custom",
      respond: async (_req, res) => {
        await held;
        sendJson(res, 200, { created: 1, data: [{ b64_json: TINY_PNG_B64 }] });
      },
    });
    onTestFinished(release);
    const prefix = uniquePrefix("baseline");
    onTestFinished(async () => {
      await deleteKeys(prefix);
    });
    const configFile = await writeConfig(dir, prefix, {
      server: { port: 0, host: "127.0.0.1" },
      store: { url: REDIS_URL, prefix },
      auth: { keys: [{ key: TEST_KEYS.default, group: "default" }] },
      groups: { default: { models: ["gpt-image-*"] } },
      channels: [{ name: "fake", baseUrl: upstream.baseUrl, models: ["gpt-image-1"] }],
      // Images and idempotency keys live `timeoutSec` + `retentionSec` from a task's creation.
      imageTasks: {
        retentionSec: 1,
        timeoutSec: slowSec(2),
        leaseSec: leaseSec(1),
        maxConcurrent: 3,
      },
    });
    const [replica] = (await startReplicas(configFile, 1)).map(target);
    const baseline = await listKeys(prefix);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(
        await submitOk(
          replica!,
          { prompt: `expire ${i}`, response_format: "url" },
          { headers: { "Idempotency-Key": `k${i}` } },
        ),
      );
    }
    await waitUntil(() => upstream.inFlight === 3, "the three generations to be running");
    expect((await listKeys(prefix)).length).toBeGreaterThan(baseline.length);
    release();
    // Records, images and idempotency keys expire; the sweep empties the indexes. A task is seen
    // running or ended, or already gone (its second of retention may pass between two polls).
    for (const id of ids) {
      await waitUntil(async () => {
        const answer = await getTask(replica!, id);
        if (answer.status === 404) return true;
        expect(["queued", "in_progress", "completed", "failed"], answer.text).toContain(
          answer.body.status,
        );
        return false;
      }, `task ${id} to end and expire`);
    }
    expect(upstreamPrompts(upstream).sort()).toEqual(["expire 0", "expire 1", "expire 2"]);
    const mentionsTask = (key: string) =>
      /::(task|image|input|idem|owner|owned:[a-z_]+):|webhook-outbox|task_/.test(key);
    await waitUntil(
      async () => (await listKeys(prefix)).filter(mentionsTask).length === 0,
      "every task's keys to go",
    );
    // What stays is a fixed set of small keys (BullMQ's counters and capped event
    // stream, the signing secret, the creation sequence), however many tasks ran.
    const fixed =
      /::(bull:(image-tasks|webhooks):(meta|id|events|stalled-check)|meta:url-signing-secret|sequence)$/;
    for (const key of baseline) expect(key).toMatch(fixed);
    // The sweep empties the expiry indexes a moment after the records (it deletes the images
    // between the two).
    let left: string[] = [];
    await waitUntil(async () => {
      left = (await listKeys(prefix)).filter((key) => !fixed.test(key));
      return left.length === 0;
    }, "only the fixed keys to stay").catch((err: unknown) => {
      throw new Error(`${(err as Error).message}: ${left.join(", ")}`);
    });
  });
});

describe("the SQLite store belongs to one process", () => {
  it("refuses a second process on the same file: exit 2, naming the file and the holder", async () => {
    const file = join(dir, "owned.db");
    const configFile = await writeConfig(dir, "sqlite-owned", {
      server: { port: 0, host: "127.0.0.1" },
      store: { url: `sqlite://${file}` },
      auth: { keys: [{ key: TEST_KEYS.default, group: "default" }] },
      groups: { default: { models: ["gpt-image-*"] } },
      channels: [{ name: "fake", baseUrl: upstream.baseUrl, models: ["gpt-image-1"] }],
    });
    const first = await serve(configFile, dir);
    const second = spawnServe(configFile, dir);
    expect(await second.exited).toBe(2);
    const lines = second.stderr().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(file);
    expect(lines[0]).toContain(`process ${first.child.pid}`);
    // The holder is unaffected; once it is gone, the file can be opened again.
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
    first.child.kill("SIGKILL");
    await first.exited;
    const third = await serve(configFile, dir);
    expect((await fetch(`${third.url}/readyz`)).status).toBe(200);
  });
});
