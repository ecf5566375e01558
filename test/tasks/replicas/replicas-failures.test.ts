import { leaseSec } from "../../support/time-factor.js";
import { Webhook } from "standardwebhooks";
import { describe, expect, it, onTestFinished } from "vitest";
import { headerRecord, startWebhookReceiver } from "../../webhooks/webhook-receiver.js";
import { getTask, submitOk, waitForStatus, waitUntil } from "../task-api.js";
import {
  useReplicaEnvironment,
  upstream,
  clusterConfig,
  startReplicas,
  target,
} from "./replica-cluster.js";
// Replicas on one Redis (see replica-cluster.ts); the scenarios are split over files to run side by side.

useReplicaEnvironment();

describe("a replica that dies or stops", () => {
  it("SIGKILLed mid-run: its tasks finish on the others, none stuck, none run twice at once", async () => {
    upstream.reset();
    upstream.behave("images", { kind: "hang" });
    const configFile = await clusterConfig({ maxConcurrent: 2, leaseSec: leaseSec(1) });
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
      leaseSec: leaseSec(1),
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
