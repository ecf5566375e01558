import { slow } from "../../support/time-factor.js";
import { describe, expect, it, onTestFinished } from "vitest";
import { startWebhookReceiver } from "../../webhooks/webhook-receiver.js";
import { uniquePrefix } from "../../support/redis.js";
import { expectError, submit, submitOk, waitForStatus, waitUntil } from "../task-api.js";
import { COMMAND_TIMEOUT_SEC, startReplicaApps } from "./failover-load.js";
import { killMasterBehindFrozenSentinels, useReplicaSet } from "./frozen-replicas.js";

// A command that outlives `store.commandTimeoutSec` has its connection cut, so that it
// reconnects. A Sentinel connection that is asking the sentinels for the master has no socket
// to cut: cut then, ioredis ended it for good, and the queue's worker (whose connection keeps
// its commands while Redis is away) never ran a task again, nor the webhooks' worker delivered.
// Here the sentinels are frozen while the master dies, so the workers' connections wait on them
// past their commands' deadlines.

const fixture = useReplicaSet();
const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;

describe("a Redis connection past its deadline while it looks for the master", () => {
  it(
    "comes back with the promoted master: a task submitted after the failover runs",
    async () => {
      const { set, upstream } = fixture;
      upstream.behave("images", { kind: "ok" });
      const [app] = await startReplicaApps({
        upstream,
        count: 1,
        store: { url: set.url, prefix: uniquePrefix("cut-resolving") },
        config: { webhooks: { secret: WEBHOOK_SECRET, allowPrivateNetworks: true } },
      });
      const receiver = await startWebhookReceiver();
      onTestFinished(() => receiver.close());
      const before = await submitOk(app!, { prompt: "before the failover" });
      expect((await waitForStatus(app!, before, ["completed", "failed"])).body.status).toBe(
        "completed",
      );

      const thaw = await killMasterBehindFrozenSentinels(set);
      // Past the worker's deadlines (its stalled checks come every lease, 2 s), a few times over.
      await new Promise((resolve) => setTimeout(resolve, slow(COMMAND_TIMEOUT_SEC * 3_000)));
      thaw();
      await set.waitForFailover(30_000);
      // Both workers came back: the queue's runs the task, the webhooks' delivers its end. The
      // submission is retried while the store answers 503 (the failover under way), as a
      // client told "retry shortly" does.
      let after = "";
      await waitUntil(
        async () => {
          const answer = await submit(app!, { prompt: "after", webhook_url: receiver.url });
          if (answer.status !== 202) expectError(answer, 503, "store_unavailable");
          after = answer.status === 202 ? answer.body.id : "";
          return after !== "";
        },
        "a submission taken after the failover",
        30_000,
      );
      const done = await waitForStatus(app!, after, ["completed", "failed"], 20_000);
      expect(done.body.status, done.text).toBe("completed");
      const delivered = () =>
        receiver.requests.some(
          (request) => (JSON.parse(request.body) as { data?: { id?: string } }).data?.id === after,
        );
      await waitUntil(delivered, "the task's webhook", 20_000);
    },
    slow(120_000),
  );
});
