import { slow } from "../support/time-factor.js";
import { randomBytes } from "node:crypto";
import { createServer as createHttpServer, request as httpRequest } from "node:http";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ImageStore } from "../../src/images/image-store.js";
import { openS3ImageStore } from "../../src/images/s3-image-store.js";
import { S3_CREDENTIALS, startS3Server, type TestS3Server } from "../support/s3-server.js";
import { readAll } from "./read-all.js";

/* The S3 backend's own parts, against s3rver on a free port: presigned links, outages. */

let s3: TestS3Server;
let store: ImageStore;
const prefix = `s3-tests/${randomBytes(4).toString("hex")}`;

beforeAll(async () => {
  s3 = await startS3Server();
  store = await openS3ImageStore({
    bucket: s3.bucket,
    prefix,
    endpoint: s3.endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: S3_CREDENTIALS,
    connectTimeoutSec: 2,
    idleTimeoutSec: 5,
  });
});
afterAll(async () => {
  await store?.close();
  await s3?.close();
});

describe("S3 image store", () => {
  it("writes under its prefix, path-style, the bytes exactly (no aws-chunked framing)", async () => {
    const bytes = randomBytes(200_000);
    await store.put("2030-01-01/task_a/0.png", bytes, "image/png");
    expect(store.objectKey("2030-01-01/task_a/0.png")).toBe(`${prefix}/2030-01-01/task_a/0.png`);
    // Read with no SDK in between: a plain GET of the path-style URL, signed by the presigner.
    const link = await store.presign!("2030-01-01/task_a/0.png", {
      expiresInSec: 600,
      signingDate: new Date(),
    });
    expect(link.startsWith(`${s3.endpoint}/${s3.bucket}/${prefix}/2030-01-01/task_a/0.png?`)).toBe(
      true,
    );
    const res = await fetch(link);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
  });

  it("makes the same presigned link for the same signing date, and one that expires", async () => {
    await store.put("2030-01-01/task_b/0.png", Buffer.from("png"), "image/png");
    const signingDate = new Date(Date.now() - 120_000);
    const options = { expiresInSec: 60, signingDate };
    const one = await store.presign!("2030-01-01/task_b/0.png", options);
    expect(await store.presign!("2030-01-01/task_b/0.png", options)).toBe(one);
    // Signed two minutes ago for one minute: refused.
    expect((await fetch(one)).status).toBe(403);
  });

  it("rejects promptly while the server is down, and works again when it is back", async () => {
    await store.put("2030-01-01/task_c/0.png", Buffer.from("before"), "image/png");
    await s3.stop();
    try {
      const started = Date.now();
      await expect(store.ping()).rejects.toThrow();
      await expect(
        store.put("2030-01-01/task_c/1.png", Buffer.from("x"), "image/png"),
      ).rejects.toThrow();
      await expect(store.get("2030-01-01/task_c/0.png")).rejects.toThrow();
      await expect(store.delete(["2030-01-01/task_c/0.png"])).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await s3.start();
    }
    await store.ping();
    const found = await store.get("2030-01-01/task_c/0.png");
    expect((await readAll(found!.body)).toString()).toBe("before");
    await store.put("2030-01-01/task_c/1.png", Buffer.from("after"), "image/png");
  });

  it(
    "is not ready, promptly, when the store accepts connections and never answers",
    async () => {
      const sockets = new Set<Socket>();
      const silent = createServer((socket) => {
        sockets.add(socket);
        socket.on("error", () => undefined);
      });
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      const hung = await openS3ImageStore({
        bucket: "images",
        prefix: "x",
        endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
        region: "us-east-1",
        forcePathStyle: true,
        credentials: S3_CREDENTIALS,
      });
      try {
        const started = Date.now();
        await expect(hung.ping()).rejects.toThrow();
        expect(Date.now() - started).toBeLessThan(8_000);
      } finally {
        await hung.close();
        for (const socket of sockets) socket.destroy();
        await new Promise((resolve) => silent.close(resolve));
      }
    },
    slow(15_000),
  );

  it("sends image bodies unsigned (no hash of the bytes), and the server takes them", async () => {
    // A recording hop in front of the server: what the store sent, as the server saw it.
    const seen: Array<{ method?: string; sha256?: string | string[] }> = [];
    const hop = createHttpServer((req, res) => {
      seen.push({ method: req.method, sha256: req.headers["x-amz-content-sha256"] });
      const target = new URL(s3.endpoint);
      const onward = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: req.headers,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(onward);
    });
    await new Promise<void>((resolve) => hop.listen(0, "127.0.0.1", resolve));
    const via = await openS3ImageStore({
      bucket: s3.bucket,
      prefix,
      // The Host header goes on as signed, so the hop is invisible to the signature.
      endpoint: `http://127.0.0.1:${(hop.address() as AddressInfo).port}`,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: S3_CREDENTIALS,
    });
    try {
      const bytes = randomBytes(100_000);
      await via.put("2030-01-01/task_u/0.png", bytes, "image/png");
      expect(seen.filter((request) => request.method === "PUT")).toEqual([
        { method: "PUT", sha256: "UNSIGNED-PAYLOAD" },
      ]);
      const found = await store.get("2030-01-01/task_u/0.png");
      expect((await readAll(found!.body)).equals(bytes)).toBe(true);
    } finally {
      await via.close();
      await new Promise((resolve) => hop.close(resolve));
    }
  });

  it("is not ready with credentials the server does not know", async () => {
    const wrong = await openS3ImageStore({
      bucket: s3.bucket,
      prefix,
      endpoint: s3.endpoint,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId: "NOT-A-KEY", secretAccessKey: "not-the-secret" },
    });
    try {
      await expect(wrong.ping()).rejects.toThrow();
      await expect(wrong.get("2030-01-01/task_a/0.png")).rejects.toThrow();
    } finally {
      await wrong.close();
    }
  });
});
