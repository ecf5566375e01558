import { slow } from "../support/time-factor.js";
import { randomBytes } from "node:crypto";
import {
  DeleteBucketCommand,
  DeleteObjectCommand,
  ListObjectsV2Command,
  S3Client,
} from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { startCephRgw, type CephRgw } from "../support/ceph-rgw.js";
import type { TestApp } from "../support/start-test-app.js";
import {
  call,
  expectError,
  submit,
  submitOk,
  upstreamPrompts,
  useApp,
  waitForStatus,
  waitUntil,
} from "../tasks/task-api.js";

/*
 * The image store fails while the service runs, on a real S3 that checks
 * signatures (Ceph's RADOS Gateway) with a real Redis task store: the
 * gateway stopped (it may come back) and the bucket deleted (a refusal no
 * retry heals). What a probe and a client see, that no task is sent to a
 * channel while its images could not be kept, and that a task whose images
 * are refused fails at once, not after images.writeRetrySec.
 */

let rgw: CephRgw;
/** A bucket per test, made before the gateway is stopped (it can take 30 s to make one just after it is back). */
const buckets: string[] = [];
beforeAll(async () => {
  rgw = await startCephRgw();
  for (let n = 0; n < 2; n += 1) {
    const bucket = `outage-${randomBytes(4).toString("hex")}`;
    await rgw.createBucket(bucket);
    buckets.push(bucket);
  }
}, slow(60_000));
afterAll(async () => {
  await rgw?.stop();
});

/** A service on Redis whose images go to a bucket of the gateway's of its own. */
async function appOnNewBucket(): Promise<{ app: TestApp; bucket: string }> {
  const bucket = buckets.shift()!;
  const app = await useApp({
    redis: true,
    config: {
      images: {
        url: `s3://${bucket}/images`,
        s3: {
          endpoint: rgw.endpoint,
          region: rgw.region,
          forcePathStyle: true,
          accessKeyId: rgw.accessKeyId,
          secretAccessKey: rgw.secretAccessKey,
        },
        checkIntervalSec: 1,
      },
    },
  });
  return { app, bucket };
}

/**
 * Deletes the bucket, whatever the service's periodic check put in it
 * meanwhile (its object lives a few milliseconds).
 */
async function deleteBucket(owner: S3Client, bucket: string): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    const listed = await owner.send(new ListObjectsV2Command({ Bucket: bucket }));
    for (const { Key } of listed.Contents ?? []) {
      await owner.send(new DeleteObjectCommand({ Bucket: bucket, Key }));
    }
    try {
      await owner.send(new DeleteBucketCommand({ Bucket: bucket }));
      return;
    } catch (err) {
      if ((err as { name?: string }).name !== "BucketNotEmpty" || attempt === 5) throw err;
    }
  }
}

async function readyz(app: TestApp) {
  const answer = await call(app, "GET", "/readyz", { key: null });
  return { status: answer.status, body: JSON.parse(answer.text) as Record<string, unknown> };
}

describe("the image store fails while the service runs (Ceph RGW, Redis)", () => {
  it(
    "the bucket deleted mid-run: the task fails storage_unavailable at once, and the reason is NoSuchBucket",
    async () => {
      const { app, bucket } = await appOnNewBucket();
      const owner = new S3Client({
        endpoint: rgw.endpoint,
        region: rgw.region,
        forcePathStyle: true,
        credentials: { accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey },
      });
      onTestFinished(() => owner.destroy());
      app.upstream.behave("images", { kind: "ok", delayMs: 1_000 });
      const asked = app.upstream.nextRequest("images");
      const id = await submitOk(app, { prompt: "refused for good", response_format: "url" });
      await asked;
      await deleteBucket(owner, bucket);
      const answeredAt = Date.now();
      const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
      expect(done.body.status).toBe("failed");
      expect(done.body.error).toMatchObject({
        code: "storage_unavailable",
        message: "The image store refused to keep the task's images.",
      });
      // At once: long before images.writeRetrySec (60 s) of retries.
      expect(Date.now() - answeredAt).toBeLessThan(20_000);
      // Until the reason names the missing bucket: a check that had written its object when
      // deleteBucket() removed it, and read it back before the bucket went, finds other bytes.
      await waitUntil(
        async () =>
          ((await readyz(app)).body.checks as { images?: string } | undefined)?.images?.includes(
            "NoSuchBucket",
          ) === true,
        "the check to find the bucket gone",
      );
      // Degraded, not unavailable: passthrough still works on this replica.
      expect(await readyz(app)).toMatchObject({
        status: 200,
        body: {
          status: "degraded",
          // Which request meets the missing bucket depends on where the check was when the
          // bucket went: one that had written its object before reads it back (GetObject).
          checks: {
            images: expect.stringMatching(
              /^the bucket does not exist \(NoSuchBucket, on (PutObject|GetObject|DeleteObject)\)$/,
            ),
          },
        },
      });
      expectError(await submit(app, { prompt: "after the bucket" }), 503, "storage_unavailable");
      expect(upstreamPrompts(app.upstream)).toEqual(["refused for good"]);
    },
    slow(60_000),
  );
  it(
    "stopped: degraded with the reason, submissions 503 with no image request at the channel, all back when it returns",
    async () => {
      const { app } = await appOnNewBucket();
      const before = await submitOk(app, { prompt: "before", response_format: "url" });
      expect((await waitForStatus(app, before, ["completed", "failed"])).body.status).toBe(
        "completed",
      );

      await rgw.stopGateway();
      try {
        await waitUntil(
          async () => (await readyz(app)).body.status === "degraded",
          "the image store's check",
        );
        expect(await readyz(app)).toMatchObject({
          status: 200,
          body: {
            status: "degraded",
            checks: {
              store: "ok",
              // Whichever step of the check the stop met first.
              images: expect.stringMatching(
                /^the image store did not answer \(ECONNREFUSED, on (HeadBucket|PutObject|GetObject|DeleteObject)\)$/,
              ),
            },
          },
        });
        const refused = await submit(app, { prompt: "while stopped" });
        expectError(refused, 503, "storage_unavailable");
        expect(refused.headers.get("retry-after")).toBe("5");
        expect(upstreamPrompts(app.upstream)).toEqual(["before"]);
      } finally {
        await rgw.startGateway();
      }
      await waitUntil(async () => (await readyz(app)).body.status === "ready", "ready again");
      const after = await submitOk(app, { prompt: "after", response_format: "url" });
      expect((await waitForStatus(app, after, ["completed", "failed"])).body.status).toBe(
        "completed",
      );
      expect(upstreamPrompts(app.upstream)).toEqual(["before", "after"]);
    },
    slow(60_000),
  );
});
