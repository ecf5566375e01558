import { slow } from "../support/time-factor.js";
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

/** The store's own code an operation failed with (an `ImageStoreError`'s). */
const codeOf = (err: unknown) => (err as { code?: string }).code;

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
    const keys: Record<string, S3Keys & { field: string }> = {
      SignatureDoesNotMatch: {
        ...rgw,
        secretAccessKey: `x${rgw.secretAccessKey}`,
        field: "images.s3.secretAccessKey",
      },
      InvalidAccessKeyId: {
        accessKeyId: "NOSUCHKEY00000000000",
        secretAccessKey: "x",
        field: "images.s3.accessKeyId",
      },
      AccessDenied: { ...rgw.outsider, field: "images.s3.accessKeyId" },
    };
    for (const [code, { accessKeyId, secretAccessKey, field }] of Object.entries(keys)) {
      const store = await openStore({ credentials: { accessKeyId, secretAccessKey } });
      // ping is a HeadBucket: a bare 403, without the code, but a refusal all the same.
      await expect(store.ping()).rejects.toMatchObject({ code: "HTTP 403", permanent: true });
      const put = store.put("2030-01-01/task_x/0.png", Buffer.from("x"), "image/png");
      expect(codeOf(await put.catch((err: unknown) => err))).toBe(code);
      const get = store.get("2030-01-01/task_x/0.png");
      expect(codeOf(await get.catch((err: unknown) => err))).toBe(code);
      // The check names the code the write got, and the field to fix.
      await expect(store.check()).rejects.toMatchObject({ code, permanent: true, field });
    }
    const noBucket = await openStore({ bucket: `missing-${randomBytes(4).toString("hex")}` });
    await expect(noBucket.ping()).rejects.toMatchObject({ code: "NotFound", permanent: true });
    await expect(
      noBucket.put("2030-01-01/task_x/0.png", Buffer.from("x"), "image/png"),
    ).rejects.toMatchObject({ code: "NoSuchBucket", permanent: true });
    // A missing bucket is a failure of the store, never "no such image".
    await expect(noBucket.get("2030-01-01/task_x/0.png")).rejects.toMatchObject({
      code: "NoSuchBucket",
    });
    await expect(noBucket.check()).rejects.toMatchObject({
      code: "NoSuchBucket",
      field: "images.url",
    });
  });

  it("passes its check with the right keys, leaving no object behind", async () => {
    const store = await openStore();
    await store.check();
    const left = [];
    for await (const item of store.list("")) left.push(item);
    expect(left).toEqual([]);
  });

  it(
    "is not ready, promptly, while the gateway is paused, and is again once it is resumed",
    async () => {
      const store = await openStore();
      await store.put("2030-01-01/task_p/0.png", Buffer.from("before"), "image/png");
      await rgw.pause();
      try {
        // ping's own deadline (5 s): the connection is accepted and never answered.
        await expect(store.ping()).rejects.toThrow();
        await expect(store.check(AbortSignal.timeout(1_000))).rejects.toMatchObject({
          name: "AbortError",
        });
        const read = store.get("2030-01-01/task_p/0.png", AbortSignal.timeout(1_000));
        await expect(read).rejects.toMatchObject({ name: "AbortError" });
      } finally {
        rgw.resume();
      }
      await store.ping();
      const found = await store.get("2030-01-01/task_p/0.png");
      expect((await readAll(found!.body)).toString()).toBe("before");
    },
    slow(20_000),
  );

  it(
    "gives up a read and a write the paused gateway never answers after idleTimeoutSec, as a store that did not answer",
    async () => {
      const store = await openStore({ idleTimeoutSec: 1 });
      await store.put("2030-01-01/task_q/0.png", Buffer.from("x"), "image/png");
      await rgw.pause();
      try {
        const outcome = await Promise.race([
          store.get("2030-01-01/task_q/0.png").then(
            () => "answered",
            () => "gave up",
          ),
          new Promise((resolve) => setTimeout(resolve, 8_000, "still waiting")),
        ]);
        expect(outcome).toBe("gave up");
        const write = store.put("2030-01-01/task_q/1.png", Buffer.from("y"), "image/png");
        await expect(write).rejects.toMatchObject({
          permanent: false,
          field: "images.s3.endpoint",
        });
      } finally {
        rgw.resume();
      }
    },
    slow(20_000),
  );

  it("fails at once while the gateway is stopped, and works again when it is back", async () => {
    const store = await openStore();
    await store.put("2030-01-01/task_s/0.png", Buffer.from("kept"), "image/png");
    await rgw.stopGateway();
    try {
      await expect(store.ping()).rejects.toThrow();
      await expect(
        store.put("2030-01-01/task_s/1.png", Buffer.from("x"), "image/png"),
      ).rejects.toMatchObject({ code: "ECONNREFUSED", permanent: false });
      await expect(store.get("2030-01-01/task_s/0.png")).rejects.toThrow();
    } finally {
      await rgw.startGateway();
    }
    const found = await store.get("2030-01-01/task_s/0.png");
    expect((await readAll(found!.body)).toString()).toBe("kept");
  });
});
