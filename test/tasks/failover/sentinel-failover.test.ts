import { slow } from "../../support/time-factor.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { uniquePrefix } from "../../support/redis.js";
import { startSentinelSet, type SentinelSet } from "../../support/redis-topology.js";
import { TOPOLOGY_PASSWORD } from "../../support/redis-topologies.js";
import {
  expectEachGeneratedOnce,
  expectNothingLost,
  expectSwitchSeen,
  startReplicaApps,
  submitThroughFailover,
} from "./failover-load.js";

// A real Sentinel set (master, two replicas, three sentinels with a password of their own)
// under two service replicas and four clients; the master is SIGKILLed mid-stream.

const SENTINEL_PASSWORD = "sentinel-secret";
let set: SentinelSet;
let upstream: FakeUpstream;

beforeAll(async () => {
  [set, upstream] = await Promise.all([
    // Two replicas: with store.minReplicas 1, submissions stay open once one is promoted.
    startSentinelSet({
      password: TOPOLOGY_PASSWORD,
      sentinelPassword: SENTINEL_PASSWORD,
      replicas: 2,
    }),
    startFakeUpstream(),
  ]);
}, slow(60_000));
afterAll(async () => {
  await Promise.all([set?.stop(), upstream?.close()]);
});

describe("Redis Sentinel: the master dies under load", () => {
  it(
    "every replica follows the promoted master without a restart; every 202 completes once, no 500",
    async () => {
      upstream.behave("images", { kind: "ok", delayMs: 300 });
      const apps = await startReplicaApps({
        upstream,
        store: {
          url: set.url,
          prefix: uniquePrefix("sentinel"),
          sentinelPassword: SENTINEL_PASSWORD,
          // A task answered 202 is on a replica too: the promotion cannot lose it.
          minReplicas: 1,
        },
      });
      const run = await submitThroughFailover(
        apps,
        () => set.killMaster(),
        () => set.waitForFailover(30_000),
      );
      await expectNothingLost(apps, run, "sentinel failover");
      expectEachGeneratedOnce(upstream);
      const promoted = await set.currentMaster();
      expect(promoted).not.toEqual(set.master);
      await expectSwitchSeen(apps, `${promoted.host}:${promoted.port}`);
    },
    slow(120_000),
  );
});
