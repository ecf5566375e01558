import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { uniquePrefix } from "../../support/redis.js";
import { call, getTask, submitOk, waitForStatus } from "../task-api.js";
import {
  clusterConfig,
  dir,
  startReplicas,
  target,
  upstream,
  useReplicaEnvironment,
} from "./replica-cluster.js";

/*
 * Two replica processes on one `file://` image directory (the documented
 * alternative to S3, a shared volume) under load: each writes task images,
 * checks the store every second (writing and removing its check file in
 * today's folder) and deletes tasks (their folders), while /readyz is polled
 * on both. No write is refused, neither replica turns unready or degraded,
 * and each reads the other's images.
 */

useReplicaEnvironment();

describe("two replicas sharing one image directory, under load", () => {
  it("complete every task, stay ready throughout, and read each other's images", async () => {
    upstream.reset();
    upstream.behave("images", { kind: "ok", delayMs: 20 });
    const images = {
      url: `file://${join(dir, `${uniquePrefix("shared")}-images`)}`,
      checkIntervalSec: 1,
    };
    const replicas = (
      await startReplicas(await clusterConfig({ maxConcurrent: 8, images }), 2)
    ).map(target);
    const readiness: string[] = [];
    let polling = true;
    const pollReadyz = (async () => {
      while (polling) {
        for (const [n, replica] of replicas.entries()) {
          const answer = await call(replica, "GET", "/readyz", { key: null });
          const status = (JSON.parse(answer.text) as { status?: string }).status;
          if (answer.status !== 200 || status !== "ready") {
            readiness.push(`replica ${n}: ${answer.status} ${answer.text}`);
          }
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    try {
      // Rounds of tasks on both replicas, each round's tasks then deleted on the other replica:
      // writes into new task folders while other folders are removed and checks come and go.
      const kept: Array<{ id: string; made: number }> = [];
      for (let round = 0; round < 15; round += 1) {
        const made = await Promise.all(
          Array.from({ length: 10 }, (_, n) =>
            submitOk(replicas[n % 2]!, { prompt: `round ${round} task ${n}`, n: 2 }).then((id) => ({
              id,
              made: n % 2,
            })),
          ),
        );
        for (const { id, made: at } of made) {
          const done = await waitForStatus(replicas[at]!, id, ["completed", "failed"]);
          expect(done.body.status, JSON.stringify(done.body.error)).toBe("completed");
        }
        const [keep, ...drop] = made;
        kept.push(keep!);
        await Promise.all(
          drop.map(async ({ id, made: at }) => {
            const deleted = await call(replicas[1 - at]!, "DELETE", `/v1/images/tasks/${id}`);
            expect(deleted.status).toBe(200);
          }),
        );
      }
      // Each kept task's images, read on the replica that did not make them.
      for (const { id, made: at } of kept) {
        const read = await getTask(replicas[1 - at]!, id);
        expect(read.status).toBe(200);
        const data = (read.body as { data?: Array<{ b64_json?: string }> }).data ?? [];
        expect(data.map((item) => (item.b64_json ?? "").length > 0)).toEqual([true, true]);
      }
    } finally {
      polling = false;
      await pollReadyz;
    }
    expect(readiness).toEqual([]);
  });
});
