import { slow } from "../../support/time-factor.js";
import { createClient } from "@keyv/redis";
import { describe, expect, it, onTestFinished } from "vitest";
import { startPrivateRedis } from "../../support/redis.js";
import { getTask, submitOk, waitForStatus, type Target } from "../task-api.js";
import {
  clusterConfig,
  startReplicas,
  target,
  upstream,
  useReplicaEnvironment,
} from "./replica-cluster.js";

useReplicaEnvironment();

/*
 * Replicas on a Redis that lost its data (a restart without persistence)
 * without `server.urlSigningSecret`: a replica that was running keeps the
 * secret it read at its start, one started afterwards signs with whatever
 * the store gives it now. Every replica must still sign links alike, or a
 * link made on one answers 404 on the other.
 */
describe("image links after Redis lost its data", () => {
  it(
    "made on a replica that was running, open on one started afterwards, and back",
    async () => {
      const redis = await startPrivateRedis();
      onTestFinished(() => redis.close());
      upstream.reset();
      upstream.behave("images", { kind: "ok" });
      const config = await clusterConfig({ storeUrl: redis.url });
      const [before] = (await startReplicas(config, 1)).map(target);

      // What Redis keeps is gone, as after a restart without persistence.
      const client = createClient({ url: redis.url });
      await client.connect();
      await client.flushAll();
      client.destroy();
      const [after] = (await startReplicas(config, 1)).map(target);

      const pairs: Array<[Target, Target]> = [
        [before!, after!],
        [after!, before!],
      ];
      for (const [maker, other] of pairs) {
        const id = await submitOk(maker, { prompt: "a link", response_format: "url" });
        const done = await waitForStatus(maker, id, ["completed", "failed"], 30_000);
        expect(done.body.status, done.text).toBe("completed");
        const link = new URL((await getTask(maker, id)).body.data![0]!.url!);
        const opened = await fetch(`${other.url}${link.pathname}${link.search}`);
        expect(opened.status, `${maker.url} -> ${other.url}`).toBe(200);
        expect(opened.headers.get("content-type")).toBe("image/png");
      }
    },
    slow(90_000),
  );
});
