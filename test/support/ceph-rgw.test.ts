import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCephRgw, type CephRgw, type S3Keys } from "./ceph-rgw.js";

/*
 * The Ceph harness as the tests use it: a real S3 (RADOS Gateway) that checks
 * every signature, knows its users and their rights, and can be paused or
 * stopped. Each answer below is what the AWS SDK v3 surfaces for it.
 */

let rgw: CephRgw;
let bucket: string;

beforeAll(async () => {
  rgw = await startCephRgw();
  console.log(`Ceph RGW started in ${rgw.startupMs} ms on ${rgw.endpoint}`);
  bucket = `harness-${randomBytes(4).toString("hex")}`;
  await rgw.createBucket(bucket);
});
afterAll(async () => {
  await rgw?.stop();
});

const clients: S3Client[] = [];
afterAll(() => {
  for (const client of clients) client.destroy();
});

/** An SDK client signing with `keys`; one attempt, so that each refusal is seen as sent. */
function clientFor(keys: S3Keys, more: Partial<S3ClientConfig> = {}): S3Client {
  const client = new S3Client({
    endpoint: rgw.endpoint,
    region: rgw.region,
    forcePathStyle: true,
    credentials: { ...keys },
    maxAttempts: 1,
    ...more,
  });
  clients.push(client);
  return client;
}

/** The error a send rejects with, as the SDK names it. */
async function refusal(sending: Promise<unknown>): Promise<{ name: string; status?: number }> {
  const err = (await sending.then(
    () => expect.fail("the request succeeded"),
    (e: unknown) => e,
  )) as { name: string; $metadata?: { httpStatusCode?: number } };
  return { name: err.name, status: err.$metadata?.httpStatusCode };
}

const read = async (client: S3Client, key: string) => {
  const answer = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return answer.Body!.transformToString();
};

describe("Ceph RADOS Gateway", () => {
  it("puts, gets and deletes an object with the user's keys", async () => {
    const s3 = clientFor(rgw);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "a/one.txt", Body: "hello" }));
    expect(await read(s3, "a/one.txt")).toBe("hello");
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: "a/one.txt" }));
    expect(
      await refusal(s3.send(new GetObjectCommand({ Bucket: bucket, Key: "a/one.txt" }))),
    ).toEqual({ name: "NoSuchKey", status: 404 });
  });

  it("refuses a wrong secret (SignatureDoesNotMatch) and an unknown key (InvalidAccessKeyId)", async () => {
    const wrongSecret = clientFor({ ...rgw, secretAccessKey: `x${rgw.secretAccessKey}` });
    const put = new PutObjectCommand({ Bucket: bucket, Key: "a/forged.txt", Body: "x" });
    expect(await refusal(wrongSecret.send(put))).toEqual({
      name: "SignatureDoesNotMatch",
      status: 403,
    });
    const unknown = clientFor({ accessKeyId: "NOSUCHKEY00000000000", secretAccessKey: "x" });
    expect(
      await refusal(unknown.send(new GetObjectCommand({ Bucket: bucket, Key: "a/forged.txt" }))),
    ).toEqual({ name: "InvalidAccessKeyId", status: 403 });
    // Nothing was written by the forged request.
    const owner = clientFor(rgw);
    expect(
      await refusal(owner.send(new HeadObjectCommand({ Bucket: bucket, Key: "a/forged.txt" }))),
    ).toEqual({ name: "NotFound", status: 404 });
  });

  it("refuses a user without rights on the bucket (AccessDenied)", async () => {
    const outsider = clientFor(rgw.outsider);
    const denied = { name: "AccessDenied", status: 403 };
    expect(
      await refusal(outsider.send(new PutObjectCommand({ Bucket: bucket, Key: "x", Body: "x" }))),
    ).toEqual(denied);
    expect(
      await refusal(outsider.send(new GetObjectCommand({ Bucket: bucket, Key: "x" }))),
    ).toEqual(denied);
    expect(await refusal(outsider.send(new ListObjectsV2Command({ Bucket: bucket })))).toEqual(
      denied,
    );
  });

  it("answers HeadBucket with a bare status: NotFound for a missing bucket, one 403 for every refusal", async () => {
    const head = (client: S3Client, name = bucket) =>
      refusal(client.send(new HeadBucketCommand({ Bucket: name })));
    // A HEAD answer has no body: the SDK names a 404 `NotFound`, where a GET says `NoSuchBucket`.
    expect(await head(clientFor(rgw), "no-such-bucket")).toEqual({ name: "NotFound", status: 404 });
    expect(
      await refusal(clientFor(rgw).send(new ListObjectsV2Command({ Bucket: "no-such-bucket" }))),
    ).toEqual({ name: "NoSuchBucket", status: 404 });
    // A wrong secret, an unknown key and a user without rights look the same: a check that
    // must name the store's own code learns it from a request with a body (GET, PUT).
    const refusals = [
      await head(clientFor({ ...rgw, secretAccessKey: `x${rgw.secretAccessKey}` })),
      await head(clientFor({ accessKeyId: "NOSUCHKEY00000000000", secretAccessKey: "x" })),
      await head(clientFor(rgw.outsider)),
    ];
    expect(refusals.map((r) => r.status)).toEqual([403, 403, 403]);
    expect(new Set(refusals.map((r) => r.name)).size).toBe(1);
  });

  it("serves a presigned GET to plain fetch, and refuses one that was tampered with or expired", async () => {
    const s3 = clientFor(rgw);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "p/signed.txt", Body: "signed" }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "p/other.txt", Body: "other" }));
    const get = new GetObjectCommand({ Bucket: bucket, Key: "p/signed.txt" });
    const link = await getSignedUrl(s3, get, { expiresIn: 60 });
    const ok = await fetch(link);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe("signed");

    const flipped = (hex: string) => (hex === "0" ? "1" : "0");
    const tampered = [
      link.replace("p/signed.txt", "p/other.txt"),
      link.replace("X-Amz-Expires=60", "X-Amz-Expires=600"),
      link.replace(/X-Amz-Signature=([0-9a-f])/, (_all, hex: string) => {
        return `X-Amz-Signature=${flipped(hex)}`;
      }),
    ];
    for (const url of tampered) {
      expect(url).not.toBe(link);
      const refused = await fetch(url);
      expect(refused.status).toBe(403);
      expect(await refused.text()).toContain("<Code>SignatureDoesNotMatch</Code>");
    }
    const old = await getSignedUrl(s3, get, {
      expiresIn: 60,
      signingDate: new Date(Date.now() - 120_000),
    });
    const expired = await fetch(old);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toContain("<Code>AccessDenied</Code>");
  });

  it("takes a streamed body sent plain, and refuses the SDK's default aws-chunked framing", async () => {
    const body = () => Readable.from([Buffer.from("streamed body")]);
    // The SDK's default (checksums WHEN_SUPPORTED) frames a stream as aws-chunked with a
    // CRC32 trailer and no Content-Length; this gateway (Ceph 16) answers 411.
    const framing = clientFor(rgw);
    expect(
      await refusal(
        framing.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: "s/framed",
            Body: body(),
            ContentLength: 13,
          }),
        ),
      ),
    ).toEqual({ name: "MissingContentLength", status: 411 });
    const plain = clientFor(rgw, {
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
    await plain.send(
      new PutObjectCommand({ Bucket: bucket, Key: "s/plain", Body: body(), ContentLength: 13 }),
    );
    expect(await read(plain, "s/plain")).toBe("streamed body");
  });

  it("times requests out while the gateway is paused, and answers them once it is resumed", async () => {
    // smithy's requestTimeout only logs a warning unless throwOnRequestTimeout is set.
    const s3 = clientFor(rgw, {
      requestHandler: {
        connectionTimeout: 1_000,
        requestTimeout: 1_500,
        throwOnRequestTimeout: true,
      },
    });
    const head = new HeadBucketCommand({ Bucket: bucket });
    await s3.send(head);
    await rgw.pause();
    try {
      // The kernel still accepts the connection: nothing answers on it.
      expect(await refusal(s3.send(head))).toMatchObject({ name: "TimeoutError" });
      const aborted = s3.send(head, { abortSignal: AbortSignal.timeout(1_000) });
      expect(await refusal(aborted)).toMatchObject({ name: "AbortError" });
    } finally {
      rgw.resume();
    }
    expect((await s3.send(head)).$metadata.httpStatusCode).toBe(200);
  });

  it("refuses connections while the gateway is stopped, and keeps the objects for its restart", async () => {
    const s3 = clientFor(rgw);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "o/kept.txt", Body: "kept" }));
    await rgw.stopGateway();
    try {
      await expect(fetch(rgw.endpoint)).rejects.toMatchObject({
        cause: { code: "ECONNREFUSED" },
      });
      await expect(s3.send(new HeadBucketCommand({ Bucket: bucket }))).rejects.toThrow();
    } finally {
      await rgw.startGateway();
    }
    expect(await read(s3, "o/kept.txt")).toBe("kept");
  });
});
