import * as http from "node:http";
import * as https from "node:https";
import type { S3Target } from "./s3-target.js";

/** Writes one object (its key as the store addresses it: prefix included); rejects as the SDK would. */
export type PutObject = (
  objectKey: string,
  bytes: Buffer,
  contentType: string,
  signal?: AbortSignal,
) => Promise<void>;

/** Dependencies of {@link createPutObject}: where objects go, and how long to wait. */
export interface PutObjectDeps {
  /** The bucket as the SDK resolved it (see `createS3Target`). */
  target: () => Promise<S3Target>;
  /** Default 5 s and 30 s, as the SDK's own requests. */
  connectTimeoutMs: number;
  idleTimeoutMs: number;
}

/** Bytes of an error answer read for its `<Code>`. */
const MAX_ERROR_BYTES = 64 * 1024;

/** The wait before the one retry of a failure that may heal (as the SDK's first backoff). */
const RETRY_DELAY_MS = 100;

/**
 * `PutObject` without the SDK's middleware stack. Through the SDK an image
 * cost ~2 ms of CPU more than the request itself (measured with a 1 KB and a
 * 3 MB body alike: its per-call middleware, and the compiler and collector
 * work it keeps alive), a fifth of a real-size task. The request is the
 * SDK's still where it matters: the endpoint, path style, signing region
 * and credentials are the SDK's (see `createS3Target`), and the SDK's SigV4
 * signer signs every header. The body goes unsigned (`UNSIGNED-PAYLOAD`, as the SDK
 * sends a streamed body; hashing 3 MB for the signature would cost another
 * fifth of a task): S3, R2, MinIO and Ceph take it, TLS covers the bytes on
 * an https endpoint, and the signature still covers the headers,
 * `Content-Length` included. It goes on a kept-alive connection (the SDK
 * sent a body from 2 MiB with `Expect: 100-continue` on a connection of its
 * own, never reused: a handshake per image). A failure is an error
 * shaped as the SDK's (`name` = S3's code, `$metadata.httpStatusCode`), so
 * `s3StoreFailure` reads both alike. Network failures, 5xx and 429 are tried
 * once more, as the SDK's `maxAttempts: 2` did.
 */
export function createPutObject(deps: PutObjectDeps): { put: PutObject; close(): void } {
  const agents = {
    "http:": new http.Agent({ keepAlive: true, maxSockets: 50 }),
    "https:": new https.Agent({ keepAlive: true, maxSockets: 50 }),
  };
  const put: PutObject = async (objectKey, bytes, contentType, signal) => {
    const where = await deps.target();
    try {
      await send(deps, agents, where, objectKey, bytes, contentType, signal);
    } catch (err) {
      if (!mayHeal(err) || signal?.aborted) throw err;
      await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
      signal?.throwIfAborted();
      await send(deps, agents, where, objectKey, bytes, contentType, signal);
    }
  };
  return {
    put,
    close() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}

/** One `PUT` of the object, signed; resolves on a 200, rejects with an SDK-shaped error. */
async function send(
  deps: PutObjectDeps,
  agents: Record<"http:" | "https:", http.Agent>,
  where: S3Target,
  objectKey: string,
  bytes: Buffer,
  contentType: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  const path = where.pathBase + objectKey;
  const signed = await where.signer.sign({
    method: "PUT",
    protocol: where.protocol,
    hostname: where.hostname,
    ...(where.port ? { port: Number(where.port) } : {}),
    path,
    query: {},
    headers: {
      host: where.host,
      "content-type": contentType,
      "content-length": String(bytes.byteLength),
      "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
    },
  });
  const transport = where.protocol === "https:" ? https : http;
  await new Promise<void>((resolve, reject) => {
    const req = transport.request(
      {
        agent: agents[where.protocol],
        hostname: where.hostname,
        ...(where.port ? { port: where.port } : {}),
        method: "PUT",
        path,
        headers: signed.headers,
        ...(signal ? { signal } : {}),
        timeout: deps.idleTimeoutMs,
      },
      (res) => answered(res, resolve, reject),
    );
    watchConnect(req, deps.connectTimeoutMs);
    req.on("timeout", () => req.destroy(timeoutError("the store went silent")));
    req.on("error", reject);
    req.end(bytes);
  });
}

/** A 200 resolves once its body is read; another status rejects with S3's code from the body. */
function answered(
  res: http.IncomingMessage,
  resolve: () => void,
  reject: (err: unknown) => void,
): void {
  const status = res.statusCode ?? 0;
  if (status >= 200 && status < 300) {
    res.resume();
    res.on("end", resolve);
    res.on("error", reject);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  res.on("data", (chunk: Buffer) => {
    if (size < MAX_ERROR_BYTES) chunks.push(chunk);
    size += chunk.length;
  });
  res.on("error", reject);
  res.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const code = /<Code>([^<]{1,200})<\/Code>/.exec(body)?.[1];
    const message = /<Message>([^<]{0,500})<\/Message>/.exec(body)?.[1];
    reject(
      Object.assign(new Error(message ?? `the store answered HTTP ${status}`), {
        name: code ?? "Unknown",
        $metadata: { httpStatusCode: status },
      }),
    );
  });
}

/** Fails the request when its connection is not made within `ms` (a reused one is made). */
function watchConnect(req: http.ClientRequest, ms: number): void {
  req.once("socket", (socket) => {
    if (!socket.connecting) return;
    const timer = setTimeout(() => req.destroy(timeoutError("no connection to the store")), ms);
    socket.once("connect", () => clearTimeout(timer));
    socket.once("close", () => clearTimeout(timer));
  });
}

function timeoutError(message: string): Error {
  return Object.assign(new Error(message), { name: "TimeoutError" });
}

/** A failure a second try may heal: the network's (a timeout too), a 5xx or a 429. */
function mayHeal(err: unknown): boolean {
  const { name, code, $metadata } = (err ?? {}) as {
    name?: string;
    code?: unknown;
    $metadata?: { httpStatusCode?: number };
  };
  const status = $metadata?.httpStatusCode;
  if (status !== undefined) return status >= 500 || status === 429;
  return name === "TimeoutError" || (typeof code === "string" && /^E[A-Z]+$/.test(code));
}
