import { randomBytes } from "node:crypto";
import { createServer as createHttpServer, type IncomingMessage } from "node:http";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImageStoreError } from "../../src/images/image-store-error.js";
import { openS3ImageStore } from "../../src/images/s3-image-store.js";
import { S3_CREDENTIALS, startS3Server, type TestS3Server } from "../support/s3-server.js";
import { readAll } from "./read-all.js";

/* How the S3 store writes and reads images: on kept-alive connections, tried once more where that can heal. */

let s3: TestS3Server;
const prefix = `s3-writes/${randomBytes(4).toString("hex")}`;

beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.close();
});

const listen = async (server: Server) => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};
const closeServer = (server: Server) =>
  new Promise((resolve) => server.close(resolve)).catch(() => undefined);

describe("S3 image writes and reads", () => {
  it("write and read images of a generated size (over 2 MiB) on one kept-alive connection", async () => {
    // A TCP hop in front of s3rver that counts the connections the store opens.
    let connections = 0;
    const sockets = new Set<Socket>();
    const target = new URL(s3.endpoint);
    const hop = createServer((socket) => {
      connections += 1;
      const onward = connect(Number(target.port), target.hostname);
      sockets.add(socket).add(onward);
      socket.pipe(onward).pipe(socket);
      socket.on("error", () => onward.destroy());
      onward.on("error", () => socket.destroy());
    });
    const store = await openS3ImageStore({
      bucket: s3.bucket,
      prefix,
      endpoint: await listen(hop),
      region: "us-east-1",
      forcePathStyle: true,
      credentials: S3_CREDENTIALS,
    });
    try {
      const images = [1, 2, 3, 4].map(() => randomBytes(2.5 * 1024 * 1024));
      for (const [i, bytes] of images.entries()) {
        await store.put(`2030-01-01/task_k/${i}.png`, bytes, "image/png");
      }
      for (const [i, bytes] of images.entries()) {
        const found = await store.get(`2030-01-01/task_k/${i}.png`);
        expect(found).toMatchObject({ size: bytes.length, contentType: "image/png" });
        expect((await readAll(found!.body)).equals(bytes)).toBe(true);
      }
      expect(await store.get("2030-01-01/task_k/missing.png")).toBeUndefined();
      // The SDK sent such bodies with `Expect: 100-continue`, each on a connection of its own,
      // and read on connections of its own agent.
      expect(connections).toBe(1);
    } finally {
      await store.close();
      for (const socket of sockets) socket.destroy();
      await closeServer(hop);
    }
  });

  it("tries a write or a read once more after a 5xx, and never after a refusal", async () => {
    // A fake store: answers each request with the next status of the script, as S3 words errors.
    const script: number[] = [];
    const puts: IncomingMessage["headers"][] = [];
    let gets = 0;
    const codes: Record<number, string> = {
      503: "SlowDown",
      403: "AccessDenied",
      404: "NoSuchBucket",
    };
    const fake = createHttpServer((req, res) => {
      req.resume();
      req.on("end", () => {
        if (req.method === "PUT") puts.push(req.headers);
        if (req.method === "GET") gets += 1;
        const status = script.shift() ?? 200;
        if (status === 200) {
          return res.writeHead(200, { etag: '"x"', "content-type": "image/png" }).end("png");
        }
        res.writeHead(status, { "content-type": "application/xml" });
        res.end(`<?xml version="1.0"?><Error><Code>${codes[status]}</Code></Error>`);
      });
    });
    const store = await openS3ImageStore({
      bucket: "images",
      prefix: "p",
      endpoint: await listen(fake),
      region: "us-east-1",
      forcePathStyle: true,
      credentials: S3_CREDENTIALS,
    });
    try {
      script.push(503);
      await store.put("2030-01-01/task_r/0.png", Buffer.from("png"), "image/png");
      expect(puts).toHaveLength(2);
      expect(puts[1]).toMatchObject({
        "content-type": "image/png",
        "content-length": "3",
        "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
      });
      expect(puts[1]!.authorization).toMatch(
        /^AWS4-HMAC-SHA256 Credential=S3RVER\/\d{8}\/us-east-1\/s3\/aws4_request, SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*, Signature=[0-9a-f]{64}$/,
      );

      puts.length = 0;
      script.push(503, 503);
      const unanswered = await store
        .put("2030-01-01/task_r/1.png", Buffer.from("png"), "image/png")
        .catch((err: unknown) => err);
      expect(unanswered).toBeInstanceOf(ImageStoreError);
      expect(unanswered).toMatchObject({ code: "HTTP 503", permanent: false });
      expect(puts).toHaveLength(2);

      puts.length = 0;
      script.push(403);
      const refused = await store
        .put("2030-01-01/task_r/2.png", Buffer.from("png"), "image/png")
        .catch((err: unknown) => err);
      expect(refused).toMatchObject({
        code: "AccessDenied",
        permanent: true,
        field: "images.s3.accessKeyId",
        operation: "PutObject",
      });
      expect(puts).toHaveLength(1);

      script.push(503);
      const found = await store.get("2030-01-01/task_r/0.png");
      expect((await readAll(found!.body)).toString()).toBe("png");
      expect(gets).toBe(2);

      gets = 0;
      script.push(404);
      const gone = await store.get("2030-01-01/task_r/0.png").catch((err: unknown) => err);
      expect(gone).toMatchObject({ code: "NoSuchBucket", permanent: true, field: "images.url" });
      expect(gets).toBe(1);
    } finally {
      await store.close();
      await closeServer(fake);
    }
  });
});
