import { slow } from "../support/time-factor.js";
import { describe, expect, it, onTestFinished } from "vitest";
import { deleteKeys, startPrivateRedis, uniquePrefix } from "../support/redis.js";
import { startS3Server } from "../support/s3-server.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";
import { expectError, submit, waitUntil } from "../tasks/task-api.js";

/*
 * `image_task_sidecar_store_up{store}` follows what the stores' checks found
 * (at start-up, periodically, and when a real operation fails): the task
 * store (a Redis of the test's own) and the image store (s3rver) go away and
 * come back, and the gauge says which one is missing. `/readyz` stays 200
 * meanwhile (degraded): passthrough works without either.
 */

/** The gauge's values as a scrape shows them, by store. */
async function storeUp(app: TestApp): Promise<Record<string, number>> {
  const text = await (await fetch(`${app.url}/metrics`)).text();
  const values: Record<string, number> = {};
  for (const match of text.matchAll(/^image_task_sidecar_store_up\{store="(\w+)"\} (\S+)$/gm)) {
    values[match[1]!] = Number(match[2]);
  }
  return values;
}

const readyz = async (app: TestApp) => (await fetch(`${app.url}/readyz`)).status;

describe("image_task_sidecar_store_up", () => {
  it(
    "is 1 per store while the checks pass, 0 for the store they found missing",
    async () => {
      const redis = await startPrivateRedis();
      onTestFinished(() => redis.close());
      const s3 = await startS3Server();
      onTestFinished(() => s3.close());
      const prefix = uniquePrefix("store-up");
      const app = await startTestApp({
        config: {
          store: { url: redis.url, prefix, commandTimeoutSec: 1 },
          images: { ...s3.imagesConfig(prefix), checkIntervalSec: 1 },
        },
      });
      onTestFinished(async () => {
        await app.close();
        await deleteKeys(prefix, redis.url).catch(() => undefined);
      });

      // Start-up checked both stores before it listened.
      expect(await storeUp(app)).toEqual({ tasks: 1, images: 1 });
      expect(await readyz(app)).toBe(200);
      expect(await storeUp(app)).toEqual({ tasks: 1, images: 1 });

      await s3.stop();
      await waitUntil(async () => (await storeUp(app)).images === 0, "the image store's check");
      expect(await storeUp(app)).toEqual({ tasks: 1, images: 0 });
      expect(await readyz(app)).toBe(200);
      await s3.start();
      await waitUntil(async () => (await storeUp(app)).images === 1, "the image store back");
      expect(await storeUp(app)).toEqual({ tasks: 1, images: 1 });

      await redis.stop();
      // A real operation meets the outage, and has the store checked at once.
      expectError(await submit(app, { prompt: "while Redis is away" }), 503, "store_unavailable");
      // Each store is checked on its own: the image store still answers. Its check runs every
      // second here, four requests to an s3rver in this (loaded) test process under a 5 s
      // deadline: on a loaded machine one of them can miss it and read 0 until the next, 2 s
      // later (a CI run here read images 0 at the last scrape), so each state is waited for.
      const both = (tasks: number, images: number) => async () => {
        const up = await storeUp(app);
        return up.tasks === tasks && up.images === images;
      };
      await waitUntil(both(0, 1), "the task store's check");
      expect(await readyz(app)).toBe(200);
      await redis.start();
      await waitUntil(both(1, 1), "the task store back", 20_000);
    },
    slow(60_000),
  );
});
