import { slow } from "../../support/time-factor.js";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { uniquePrefix } from "../../support/redis.js";
import { startRedisCluster, type RedisCluster } from "../../support/redis-topology.js";
import { TOPOLOGY_PASSWORD } from "../../support/redis-topologies.js";
import { startWebhookReceiver } from "../../webhooks/webhook-receiver.js";
import { openEvents } from "../sse-client.js";
import { call, cancelTask, submit, submitOk, waitForStatus, type TaskJson } from "../task-api.js";
import {
  expectEachGeneratedOnce,
  expectNothingLost,
  expectSwitchSeen,
  startReplicaApps,
  submitThroughFailover,
} from "./failover-load.js";

// A real Redis Cluster (three masters, a replica each) under two service replicas: every
// feature across the replicas, then one master SIGKILLed under a stream of submissions.

const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 5).toString("base64")}`;
let cluster: RedisCluster;
let upstream: FakeUpstream;

beforeAll(async () => {
  [cluster, upstream] = await Promise.all([
    startRedisCluster({ password: TOPOLOGY_PASSWORD }),
    startFakeUpstream(),
  ]);
}, slow(60_000));
afterAll(async () => {
  await Promise.all([cluster?.stop(), upstream?.close()]);
});

describe("Redis Cluster", () => {
  it(
    "serves cancel, idempotency, the list, events and webhooks across two replicas, each step on a replica",
    async () => {
      upstream.behave("images", { kind: "ok", delayMs: 300 });
      // store.minReplicas on a cluster: WAIT through the slot's master, its connection counted
      // per node (a node's first connect must not read as a failover: no 503 here).
      const [a, b] = await startReplicaApps({
        upstream,
        store: { url: cluster.url, prefix: uniquePrefix("cluster"), minReplicas: 1 },
        config: { webhooks: { secret: WEBHOOK_SECRET, allowPrivateNetworks: true } },
      });
      const receiver = await startWebhookReceiver();
      onTestFinished(() => receiver.close());

      // One Idempotency-Key on both replicas makes one task, which B streams and A lists.
      const headers = { "Idempotency-Key": "cluster-once" };
      const first = await submit(a!, { prompt: "once", webhook_url: receiver.url }, { headers });
      const again = await submit(b!, { prompt: "once", webhook_url: receiver.url }, { headers });
      expect([first.status, again.status], again.text).toEqual([202, 202]);
      expect(again.body.id).toBe(first.body.id);
      const id = first.body.id;
      const watched = await openEvents(b!, `/v1/images/tasks/${id}/events`);
      let last = await watched.event(0);
      for (let n = 1; last.id !== "final"; n += 1) last = await watched.event(n);
      expect(last).toMatchObject({ event: "image.task.completed" });
      const listed = await call(a!, "GET", "/v1/images/tasks");
      expect(listed.status, listed.text).toBe(200);
      expect(
        (listed.body as unknown as { data: TaskJson[] }).data.map((task) => task.id),
      ).toContain(id);

      // Its webhook, signed, from whichever replica ran it.
      await receiver.received(1);
      const [request] = receiver.requests;
      const event = new Webhook(WEBHOOK_SECRET).verify(request!.body, {
        "webhook-id": String(request!.headers["webhook-id"]),
        "webhook-timestamp": String(request!.headers["webhook-timestamp"]),
        "webhook-signature": String(request!.headers["webhook-signature"]),
      }) as { data: { id: string; status: string } };
      expect(event.data).toMatchObject({ id, status: "completed" });

      // A cancel sent to B reaches the run, wherever it is.
      upstream.behave("images", { kind: "hang" });
      const held = await submitOk(a!, { prompt: "held" });
      await waitForStatus(b!, held, ["in_progress"]);
      expect((await cancelTask(b!, held)).status).toBe(200);
      const cancelled = await waitForStatus(a!, held, ["failed"]);
      expect(cancelled.body.error).toMatchObject({ code: "cancelled" });
    },
    slow(60_000),
  );

  it(
    "a master dies under load: both replicas carry on without a restart; every 202 completes once, no 500",
    async () => {
      upstream.behave("images", { kind: "ok", delayMs: 300 });
      const prefix = uniquePrefix("cluster");
      const apps = await startReplicaApps({ upstream, store: { url: cluster.url, prefix } });
      const run = await submitThroughFailover(
        apps,
        // The master of the deployment's slot: every key of the deployment is tagged `{prefix}`.
        () => cluster.killMaster({ key: prefix }),
        () => cluster.waitForFailover(30_000),
      );
      await expectNothingLost(apps, run, "cluster failover");
      expectEachGeneratedOnce(upstream);
      const promoted = await cluster.waitForFailover(1_000);
      await expectSwitchSeen(apps, `${promoted.host}:${promoted.port}`);
    },
    slow(120_000),
  );
});
