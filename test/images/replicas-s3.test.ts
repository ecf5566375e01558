import { slow } from "../support/time-factor.js";
import { randomBytes } from "node:crypto";
import { basename } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openS3ImageStore } from "../../src/images/s3-image-store.js";
import { createClient } from "@keyv/redis";
import { REDIS_URL, listKeys } from "../support/redis.js";
import { S3_CREDENTIALS, startS3Server, type TestS3Server } from "../support/s3-server.js";
import {
  clusterConfig,
  startReplicas,
  target,
  upstream,
  useReplicaEnvironment,
} from "../tasks/replicas/replica-cluster.js";
import { getTask, submitOk, waitForStatus } from "../tasks/task-api.js";
import { imagesAnswer, noisePng } from "./noise-png.js";

/*
 * Two service processes on one Redis with their images in S3 (s3rver on a
 * free port): what an operator running replicas sees with real-size images.
 */

useReplicaEnvironment();
let s3: TestS3Server;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.close();
});

/** Bytes of each key under `prefix` in Redis (`MEMORY USAGE`). */
async function redisSizes(prefix: string): Promise<Map<string, number>> {
  const client = createClient({ url: REDIS_URL });
  await client.connect();
  try {
    const sizes = new Map<string, number>();
    for (const key of await listKeys(prefix)) sizes.set(key, (await client.memoryUsage(key)) ?? 0);
    return sizes;
  } finally {
    await client.close();
  }
}

describe("two replicas on Redis, images in S3", () => {
  it(
    "a task made on one is read on the other, link and b64_json byte for byte; Redis keeps records only",
    async () => {
      const images = [noisePng(), noisePng()];
      upstream.reset();
      upstream.behave("images", {
        kind: "custom",
        respond: (_req, res) => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(imagesAnswer(images));
        },
      });
      const s3Prefix = `replicas-${randomBytes(4).toString("hex")}`;
      const configFile = await clusterConfig({ images: s3.imagesConfig(s3Prefix) });
      const [a, b] = (await startReplicas(configFile, 2)).map(target);

      const urlTask = await submitOk(a!, { prompt: "a lighthouse", n: 2, response_format: "url" });
      const b64Task = await submitOk(a!, {
        prompt: "a harbour",
        n: 2,
        response_format: "b64_json",
      });
      for (const id of [urlTask, b64Task]) {
        const done = await waitForStatus(a!, id, ["completed", "failed"], 30_000);
        expect(done.body.status, done.text).toBe("completed");
      }

      // The links, from the other replica, fetched from the other replica.
      const linked = await getTask(b!, urlTask);
      expect(linked.body.data).toHaveLength(images.length);
      for (const [index, item] of linked.body.data!.entries()) {
        const res = await fetch(item.url!);
        expect(res.status).toBe(200);
        expect(res.headers.get("content-type")).toBe("image/png");
        expect(Number(res.headers.get("content-length"))).toBe(images[index]!.length);
        expect(Buffer.from(await res.arrayBuffer()).equals(images[index]!)).toBe(true);
      }
      // The base64, from the other replica.
      const polled = await getTask(b!, b64Task);
      expect(Number(polled.headers.get("content-length"))).toBe(Buffer.byteLength(polled.text));
      expect(polled.body.data).toHaveLength(images.length);
      for (const [index, item] of polled.body.data!.entries()) {
        expect(Buffer.from(item.b64_json!, "base64").equals(images[index]!)).toBe(true);
      }

      // The bytes are in the bucket, under the day the tasks expire; Redis holds records only.
      const store = await openS3ImageStore({
        bucket: s3.bucket,
        prefix: s3Prefix,
        endpoint: s3.endpoint,
        region: "us-east-1",
        forcePathStyle: true,
        credentials: S3_CREDENTIALS,
      });
      const objects: Array<{ key: string; size: number }> = [];
      for await (const entry of store.list("")) objects.push(entry);
      await store.close();
      expect(objects).toHaveLength(4);
      for (const { key } of objects) {
        expect(key).toMatch(/^\d{4}-\d{2}-\d{2}\/task_[A-Za-z0-9_-]+\/[01]\.png$/);
      }
      const prefix = basename(configFile, ".yaml"); // the harness names the file after the prefix
      const sizes = await redisSizes(prefix);
      for (const id of [urlTask, b64Task]) {
        expect(sizes.get(`${prefix}::task:${id}`)).toBeLessThan(2048);
      }
      const total = [...sizes.values()].reduce((sum, size) => sum + size, 0);
      expect(total).toBeLessThan(100_000); // two tasks of 4 images of 3 MB: nothing of them
    },
    slow(60_000),
  );
});
