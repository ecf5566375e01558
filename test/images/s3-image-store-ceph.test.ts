import { randomBytes } from "node:crypto";
import { ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ImageStore } from "../../src/images/image-store.js";
import { openS3ImageStore, type S3ImageStoreOptions } from "../../src/images/s3-image-store.js";
import { startCephRgw, type CephRgw, type S3Keys } from "../support/ceph-rgw.js";
import { readAll } from "./read-all.js";

/*
 * The service's S3 image store against Ceph's RADOS Gateway (a one-node Ceph
 * on free ports): a real S3 that checks every signature and the users' rights,
 * where s3rver checks neither. What the store sends must pass there.
 */

let rgw: CephRgw;
let bucket: string;
const stores: ImageStore[] = [];

beforeAll(async () => {
  rgw = await startCephRgw();
  bucket = `images-${randomBytes(4).toString("hex")}`;
  await rgw.createBucket(bucket);
});
afterAll(async () => {
  for (const store of stores) await store.close();
  await rgw?.stop();
});

/** The service's store on the gateway, under a prefix of its own. */
async function openStore(more: Partial<S3ImageStoreOptions> = {}): Promise<ImageStore> {
  const store = await openS3ImageStore({
    bucket,
    prefix: `images/${randomBytes(4).toString("hex")}`,
    endpoint: rgw.endpoint,
    region: rgw.region,
    forcePathStyle: true,
    credentials: { accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey },
    connectTimeoutSec: 2,
    idleTimeoutSec: 5,
    ...more,
  });
  stores.push(store);
  return store;
}

const nameOf = (err: unknown) => (err as { name?: string }).name;

describe("S3 image store on Ceph RGW", () => {
  it("puts (unsigned payload), gets, lists by prefix, presigns and deletes", async () => {
    const store = await openStore();
    await store.ping();
    const big = randomBytes(3 * 1024 * 1024 + 5); // a real-size image, not compressible
    await store.put("2030-01-01/task_a/0.png", big, "image/png");
    await store.put("2030-01-01/task_a/partial-0.png", Buffer.from("partial"), "image/png");
    await store.put("2030-01-02/task_b/0.webp", Buffer.from("later"), "image/webp");

    const found = await store.get("2030-01-01/task_a/0.png");
    expect(found).toMatchObject({ size: big.byteLength, contentType: "image/png" });
    expect(found!.etag).toMatch(/^"[^"]+"$/);
    expect((await readAll(found!.body)).equals(big)).toBe(true);
    expect(await store.get("2030-01-01/task_a/9.png")).toBeUndefined();

    const listed = [];
    for await (const item of store.list("2030-01-01/")) listed.push(item);
    expect(listed).toEqual([
      { key: "2030-01-01/task_a/0.png", size: big.byteLength },
      { key: "2030-01-01/task_a/partial-0.png", size: 7 },
    ]);

    // The object keys as the bucket's owner sees them: under the store's prefix, path-style.
    const owner = new S3Client({
      endpoint: rgw.endpoint,
      region: rgw.region,
      forcePathStyle: true,
      credentials: { accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey },
    });
    try {
      const prefix = store.objectKey("2030-01-01").slice(0, -"2030-01-01".length);
      const page = await owner.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
      expect(page.Contents?.map((item) => item.Key)).toEqual([
        `${prefix}2030-01-01/task_a/0.png`,
        `${prefix}2030-01-01/task_a/partial-0.png`,
        `${prefix}2030-01-02/task_b/0.webp`,
      ]);
    } finally {
      owner.destroy();
    }

    const link = await store.presign!("2030-01-02/task_b/0.webp", {
      expiresInSec: 600,
      signingDate: new Date(),
    });
    expect(link.startsWith(`${rgw.endpoint}/${bucket}/${store.objectKey("2030-01-02")}`)).toBe(
      true,
    );
    const answer = await fetch(link);
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("image/webp");
    expect(await answer.text()).toBe("later");
    expect((await fetch(link.replace("task_b/0.webp", "task_a/0.png"))).status).toBe(403);

    await store.delete([
      "2030-01-01/task_a/0.png",
      "2030-01-01/task_a/partial-0.png",
      "2030-01-02/task_b/0.webp",
      "2030-01-03/task_c/0.png", // never written: fine
    ]);
    expect(await store.get("2030-01-01/task_a/0.png")).toBeUndefined();
    const left = [];
    for await (const item of store.list("")) left.push(item);
    expect(left).toEqual([]);
  });

  it("is refused with the gateway's own codes: wrong secret, unknown key, no rights, no bucket", async () => {
    const keys: Record<string, S3Keys> = {
      SignatureDoesNotMatch: { ...rgw, secretAccessKey: `x${rgw.secretAccessKey}` },
      InvalidAccessKeyId: { accessKeyId: "NOSUCHKEY00000000000", secretAccessKey: "x" },
      AccessDenied: rgw.outsider,
    };
    for (const [code, { accessKeyId, secretAccessKey }] of Object.entries(keys)) {
      const store = await openStore({ credentials: { accessKeyId, secretAccessKey } });
      // ping is a HeadBucket: a bare 403, without the code.
      await expect(store.ping()).rejects.toMatchObject({ $metadata: { httpStatusCode: 403 } });
      const put = store.put("2030-01-01/task_x/0.png", Buffer.from("x"), "image/png");
      expect(nameOf(await put.catch((err: unknown) => err))).toBe(code);
      const get = store.get("2030-01-01/task_x/0.png");
      expect(nameOf(await get.catch((err: unknown) => err))).toBe(code);
    }
    const noBucket = await openStore({ bucket: `missing-${randomBytes(4).toString("hex")}` });
    await expect(noBucket.ping()).rejects.toMatchObject({ name: "NotFound" });
    await expect(
      noBucket.put("2030-01-01/task_x/0.png", Buffer.from("x"), "image/png"),
    ).rejects.toMatchObject({ name: "NoSuchBucket" });
  });

  it("is not ready, promptly, while the gateway is paused, and is again once it is resumed", async () => {
    const store = await openStore();
    await store.put("2030-01-01/task_p/0.png", Buffer.from("before"), "image/png");
    rgw.pause();
    try {
      // ping's own deadline (5 s): the connection is accepted and never answered.
      await expect(store.ping()).rejects.toThrow();
      const read = store.get("2030-01-01/task_p/0.png", AbortSignal.timeout(1_000));
      await expect(read).rejects.toMatchObject({ name: "AbortError" });
    } finally {
      rgw.resume();
    }
    await store.ping();
    const found = await store.get("2030-01-01/task_p/0.png");
    expect((await readAll(found!.body)).toString()).toBe("before");
  }, 20_000);

  // Known gap (src/images/s3-image-store.ts): idleTimeoutSec is passed as smithy's
  // requestTimeout, which in @smithy/node-http-handler 4.x only logs a warning unless
  // throwOnRequestTimeout is set; socketTimeout is the idle timeout that throws. So a read or
  // write without its own signal waits for a silent store for ever. Flip to `it` once fixed.
  it.fails(
    "gives up a read the paused gateway never answers after idleTimeoutSec",
    async () => {
      const store = await openStore({ idleTimeoutSec: 1 });
      await store.put("2030-01-01/task_q/0.png", Buffer.from("x"), "image/png");
      rgw.pause();
      try {
        const outcome = await Promise.race([
          store.get("2030-01-01/task_q/0.png").then(
            () => "answered",
            () => "gave up",
          ),
          new Promise((resolve) => setTimeout(resolve, 8_000, "still waiting")),
        ]);
        expect(outcome).toBe("gave up");
      } finally {
        rgw.resume();
      }
    },
    20_000,
  );

  it("fails at once while the gateway is stopped, and works again when it is back", async () => {
    const store = await openStore();
    await store.put("2030-01-01/task_s/0.png", Buffer.from("kept"), "image/png");
    await rgw.stopGateway();
    try {
      await expect(store.ping()).rejects.toThrow();
      await expect(
        store.put("2030-01-01/task_s/1.png", Buffer.from("x"), "image/png"),
      ).rejects.toThrow();
      await expect(store.get("2030-01-01/task_s/0.png")).rejects.toThrow();
    } finally {
      await rgw.startGateway();
    }
    const found = await store.get("2030-01-01/task_s/0.png");
    expect((await readAll(found!.body)).toString()).toBe("kept");
  });
});
