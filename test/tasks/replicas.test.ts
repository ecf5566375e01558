import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import {
  REDIS_URL,
  deleteKeys,
  listKeys,
  startPrivateRedis,
  uniquePrefix,
} from "../support/redis.js";
import { serve, spawnServe, writeConfig, type ServedProcess } from "../support/serve-process.js";
import { TEST_KEYS, UPSTREAM_KEY } from "../support/start-test-app.js";
import { headerRecord, startWebhookReceiver } from "../webhooks/webhook-receiver.js";
import {
  PNG_MAGIC,
  call,
  cancelTask,
  expectError,
  getTask,
  submit,
  submitOk,
  waitForStatus,
  waitUntil,
  type Target,
} from "./task-api.js";

/** A 1x1 PNG, for answers the test writes itself. */
const PNG_B64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/*
 * Several real service processes (the built bin) on one Redis, in front of a
 * fake upstream that counts concurrent generations: what an operator running
 * replicas behind a load balancer sees. Short leases (1 s) keep recovery fast.
 */

let dir: string;
let upstream: FakeUpstream;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "replicas-"));
  upstream = await startFakeUpstream();
});
afterAll(async () => {
  await upstream.close();
  await rm(dir, { recursive: true, force: true });
});

interface ClusterOptions {
  storeUrl?: string;
  maxConcurrent?: number;
  leaseSec?: number;
  shutdownGraceSec?: number;
  webhooks?: Record<string, unknown>;
}

/** A deployment's config: every replica gets the same one. */
async function clusterConfig(options: ClusterOptions = {}): Promise<string> {
  const prefix = uniquePrefix("replicas");
  // A private Redis goes with its data; the shared one keeps nothing of the test.
  if (!options.storeUrl) {
    onTestFinished(async () => {
      await deleteKeys(prefix);
    });
  }
  return writeConfig(dir, prefix, {
    server: { port: 0, host: "127.0.0.1", shutdownGraceSec: options.shutdownGraceSec ?? 2 },
    store: { url: options.storeUrl ?? REDIS_URL, prefix },
    auth: {
      keys: [
        { key: TEST_KEYS.default, group: "default" },
        { key: TEST_KEYS.other, group: "default" },
      ],
    },
    groups: { default: { models: ["gpt-4o-mini", "gpt-image-*"] } },
    channels: [
      {
        name: "fake",
        baseUrl: upstream.baseUrl,
        apiKey: UPSTREAM_KEY,
        models: ["gpt-4o-mini", "gpt-image-1"],
      },
    ],
    imageTasks: {
      maxConcurrent: options.maxConcurrent ?? 2,
      leaseSec: options.leaseSec ?? 1,
      pollIntervalSec: 1,
    },
    ...(options.webhooks ? { webhooks: options.webhooks } : {}),
  });
}

const target = (replica: ServedProcess): Target => ({ url: replica.url, key: TEST_KEYS.default });

async function startReplicas(configFile: string, count: number): Promise<ServedProcess[]> {
  return Promise.all(Array.from({ length: count }, () => serve(configFile, dir)));
}

describe("three replicas on one Redis", () => {
  it("hold the global limit and reach it, answer alike from every replica, keep idempotency and image URLs", async () => {
    upstream.reset();
    upstream.behave("images", { kind: "ok", delayMs: 700 });
    const replicas = (await startReplicas(await clusterConfig({ maxConcurrent: 2 }), 3)).map(
      target,
    );

    // Submitted round-robin; every replica sees each task right after submission.
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const id = await submitOk(replicas[i % 3]!, {
        prompt: `spread ${i}`,
        response_format: i === 0 ? "url" : "b64_json",
      });
      ids.push(id);
      for (const replica of replicas) expect((await getTask(replica, id)).status).toBe(200);
    }
    for (const id of ids) {
      const done = await waitForStatus(replicas[0]!, id, ["completed", "failed"], 20_000);
      expect(done.body.status, done.text).toBe("completed");
    }
    expect(upstream.maxInFlight).toBe(2);
    expect(upstream.maxInFlightPerPrompt).toBe(1);

    // Every replica answers every poll the same (a signed URL starts with the replica asked).
    const sameOrigin = (text: string) => text.replace(/http:\/\/127\.0\.0\.1:\d+/g, "ORIGIN");
    for (const id of ids) {
      const answers = await Promise.all(replicas.map((replica) => getTask(replica, id)));
      for (const answer of answers.slice(1)) {
        expect(sameOrigin(answer.text)).toBe(sameOrigin(answers[0]!.text));
      }
    }
    // The signed image URL works on every replica.
    const url = new URL((await getTask(replicas[1]!, ids[0]!)).body.data![0]!.url!);
    for (const replica of replicas) {
      const image = await fetch(`${replica.url}${url.pathname}${url.search}`);
      expect(image.status).toBe(200);
      expect(Buffer.from(await image.arrayBuffer()).subarray(0, 8)).toEqual(PNG_MAGIC);
    }

    // One Idempotency-Key sent to two replicas at the same moment makes one task.
    const headers = { "Idempotency-Key": "same-moment" };
    const both = await Promise.all(
      replicas.slice(0, 2).map((replica) => submit(replica, { prompt: "once" }, { headers })),
    );
    expect(both.map((answer) => answer.status)).toEqual([202, 202]);
    expect(both[0]!.body.id).toBe(both[1]!.body.id);
  });

  it("reach the replica running a task with a cancel sent to another, and show the cluster's queue", async () => {
    upstream.reset();
    upstream.behave("images", { kind: "hang" });
    const replicas = (await startReplicas(await clusterConfig({ maxConcurrent: 2 }), 3)).map(
      target,
    );
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await submitOk(replicas[i % 3]!, { prompt: `held ${i}` }));
    await waitUntil(() => upstream.inFlight === 2, "two generations upstream");

    // The queue gauges are the cluster's: the same on every replica.
    const gauges = await Promise.all(
      replicas.map(async (replica) => {
        const text = await (await fetch(`${replica.url}/metrics`)).text();
        return [
          /^image_task_sidecar_task_queue_depth (\S+)/m,
          /^image_task_sidecar_tasks_in_progress (\S+)/m,
        ]
          .map((pattern) => pattern.exec(text)?.[1])
          .join(",");
      }),
    );
    expect(gauges).toEqual(["2,2", "2,2", "2,2"]);

    // Cancel each running task through every replica in turn: its upstream call is aborted.
    const running: string[] = [];
    for (const id of ids) {
      if ((await getTask(replicas[0]!, id)).body.status === "in_progress") running.push(id);
    }
    expect(running).toHaveLength(2);
    for (const [index, id] of running.entries()) {
      const cancelled = await cancelTask(replicas[(index + 2) % 3]!, id);
      expect(cancelled.body).toMatchObject({ status: "failed", error: { code: "cancelled" } });
      await waitUntil(() => upstream.aborted >= index + 1, "the upstream call to be aborted");
    }
    // The waiting tasks take the freed slots.
    await waitUntil(
      () => upstream.inFlight === 2 && upstream.requests.length === 4,
      "the next two",
    );
  });
});

describe("waiting across replicas", () => {
  it("answers ?wait=N on one replica the moment the task finishes on another", async () => {
    upstream.reset();
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let answeredAt = 0;
    upstream.behave("images", {
      kind: "custom",
      async respond(_req, res) {
        await gate;
        answeredAt = performance.now();
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ created: 1, data: [{ b64_json: PNG_B64 }] }));
      },
    });
    const configFile = await clusterConfig({ maxConcurrent: 1 });
    // The task runs on the first replica: the second does not exist yet when it starts.
    const [runner] = await startReplicas(configFile, 1);
    const id = await submitOk(target(runner!), { prompt: "finish elsewhere" });
    await waitUntil(() => upstream.inFlight === 1, "the first replica to run the task");
    const [waiter] = await startReplicas(configFile, 1);

    const waiting = call(target(waiter!), "GET", `/v1/images/tasks/${id}?wait=20`);
    let answered = false;
    void waiting.then(() => (answered = true));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(answered).toBe(false);
    open();
    const answer = await waiting;
    const latency = performance.now() - answeredAt;
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.status).toBe("completed");
    // Heard over Redis pub/sub within milliseconds, not after a poll tick or the 20 s.
    expect(latency).toBeLessThan(500);

    // Prefer: wait on the other replica answers 200 once the task finishes anywhere.
    upstream.behave("images", { kind: "ok", delayMs: 200 });
    const preferred = await submit(
      target(waiter!),
      { prompt: "prefer across" },
      { headers: { Prefer: "wait=20" } },
    );
    expect(preferred.status, preferred.text).toBe(200);
    expect(preferred.headers.get("preference-applied")).toBe("wait=20");
  });
});

describe("a replica that dies or stops", () => {
  it("SIGKILLed mid-run: its tasks finish on the others, none stuck, none run twice at once", async () => {
    upstream.reset();
    upstream.behave("images", { kind: "hang" });
    const configFile = await clusterConfig({ maxConcurrent: 2, leaseSec: 1 });
    const [doomed] = await startReplicas(configFile, 1);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await submitOk(target(doomed!), { prompt: `kill ${i}` }));
    await waitUntil(() => upstream.inFlight === 2, "the doomed replica to run two tasks");
    const survivors = (await startReplicas(configFile, 2)).map(target);

    doomed!.child.kill("SIGKILL");
    await doomed!.exited;
    upstream.behave("images", { kind: "ok", delayMs: 200 });
    for (const id of ids) {
      const done = await waitForStatus(survivors[0]!, id, ["completed", "failed"], 20_000);
      expect(done.body.status, done.text).toBe("completed");
    }
    expect(upstream.maxInFlight).toBeLessThanOrEqual(2);
    expect(upstream.maxInFlightPerPrompt).toBe(1);
  });

  it("SIGKILLed mid-delivery: another replica makes the webhook attempt again, same webhook-id", async () => {
    upstream.reset();
    const secret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
    // The first attempt is never answered: its replica dies holding it.
    const receiver = await startWebhookReceiver((res, _request, n) => {
      if (n > 1) res.writeHead(200).end();
    });
    onTestFinished(() => receiver.close());
    const configFile = await clusterConfig({
      leaseSec: 1,
      webhooks: { secret, allowPrivateNetworks: true, timeoutSec: 60 },
    });
    const [doomed] = await startReplicas(configFile, 1);
    const id = await submitOk(target(doomed!), { prompt: "hook", webhook_url: receiver.url });
    await receiver.received(1);
    const [survivor] = await startReplicas(configFile, 1);
    doomed!.child.kill("SIGKILL");
    await doomed!.exited;
    await receiver.received(2);
    const [first, second] = receiver.requests;
    expect(second!.headers["webhook-id"]).toBe(first!.headers["webhook-id"]);
    const event = new Webhook(secret).verify(second!.body, headerRecord(second!.headers)) as {
      data: { id: string };
    };
    expect(event.data.id).toBe(id);
    expect((await getTask(target(survivor!), id)).body.status).toBe("completed");
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(receiver.requests).toHaveLength(2);
  });

  it("SIGTERMed: hands its running tasks to another replica at once, not after a lease expiry", async () => {
    upstream.reset();
    upstream.behave("images", { kind: "hang" });
    // A long lease: only a handover, not a lock expiry, can move the tasks in time.
    const configFile = await clusterConfig({ maxConcurrent: 2, leaseSec: 60, shutdownGraceSec: 1 });
    const [leaving] = await startReplicas(configFile, 1);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) ids.push(await submitOk(target(leaving!), { prompt: `term ${i}` }));
    await waitUntil(() => upstream.inFlight === 2, "two running tasks");
    const [staying] = (await startReplicas(configFile, 1)).map(target);
    upstream.behave("images", { kind: "ok", delayMs: 100 });

    const signalled = Date.now();
    leaving!.child.kill("SIGTERM");
    // npm forwards the signal too: a second SIGTERM does not cut the handover short.
    setTimeout(() => leaving!.child.kill("SIGTERM"), 100);
    expect(await leaving!.exited).toBe(0);
    for (const id of ids) {
      const done = await waitForStatus(staying!, id, ["completed", "failed"], 15_000);
      expect(done.body.status, done.text).toBe("completed");
    }
    expect(Date.now() - signalled).toBeLessThan(15_000);
    expect(upstream.maxInFlightPerPrompt).toBe(1);
  });
});

describe("Redis going away", () => {
  it("crashes nothing: /readyz and task routes answer 503, passthrough works, and everything recovers", async () => {
    const redis = await startPrivateRedis();
    onTestFinished(() => redis.close());
    upstream.reset();
    upstream.behave("images", { kind: "ok", delayMs: 1000 });
    const replicas = (
      await startReplicas(await clusterConfig({ storeUrl: redis.url, leaseSec: 1 }), 2)
    ).map(target);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push(await submitOk(replicas[i % 2]!, { prompt: `outage ${i}` }));
    await waitUntil(() => upstream.inFlight === 2, "two running tasks");

    await redis.stop();
    for (const replica of replicas) {
      expect((await fetch(`${replica.url}/readyz`)).status).toBe(503);
      expect((await fetch(`${replica.url}/healthz`)).status).toBe(200);
      expectError(await getTask(replica, ids[0]!), 503, "store_unavailable");
      expectError(await submit(replica, { prompt: "while away" }), 503, "store_unavailable");
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
        async () => (await fetch(`${replica.url}/readyz`)).status === 200,
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
      imageTasks: { retentionSec: 1, timeoutSec: 2, leaseSec: 1 },
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
    for (const id of ids) await waitForStatus(replica!, id, ["completed", "failed"]);
    expect((await listKeys(prefix)).length).toBeGreaterThan(baseline.length);
    // Records, images and idempotency keys expire; the sweep empties the indexes.
    await waitUntil(async () => (await getTask(replica!, ids[2]!)).status === 404, "expiry");
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
    for (const key of [...baseline, ...(await listKeys(prefix))]) expect(key).toMatch(fixed);
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
