import { createHash, createHmac, type BinaryLike } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import type * as S3Sdk from "@aws-sdk/client-s3";
import type { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import type * as SignerModule from "@smithy/signature-v4";
import type { SignatureV4 } from "@smithy/signature-v4";

/** Writes one object (its key as the store addresses it: prefix included); rejects as the SDK would. */
export type PutObject = (
  objectKey: string,
  bytes: Buffer,
  contentType: string,
  signal?: AbortSignal,
) => Promise<void>;

/** Dependencies of {@link createPutObject}: the store's SDK client, and how long to wait. */
export interface PutObjectDeps {
  sdk: typeof S3Sdk;
  client: S3Sdk.S3Client;
  signerModule: typeof SignerModule;
  getSignedUrl: typeof getSignedUrl;
  bucket: string;
  /** Default 5 s and 30 s, as the SDK's own requests. */
  connectTimeoutMs: number;
  idleTimeoutMs: number;
}

/** Where objects go and how requests there are signed, as the SDK resolved it. */
interface Target {
  transport: typeof http | typeof https;
  hostname: string;
  port: string;
  host: string;
  /** The bucket's path up to the key (path-style: `/bucket/`; virtual-hosted: `/`). */
  pathBase: string;
  signer: SignatureV4;
}

/** The key the target is resolved with; any key of checked characters is addressed alike. */
const PROBE = "put-object-probe";

/** Bytes of an error answer read for its `<Code>`. */
const MAX_ERROR_BYTES = 64 * 1024;

/** The wait before the one retry of a failure that may heal (as the SDK's first backoff). */
const RETRY_DELAY_MS = 100;

/**
 * `PutObject` without the SDK's middleware stack. Through the SDK an image
 * cost ~2 ms of CPU more than the request itself (measured with a 1 KB and a
 * 3 MB body alike: its per-call middleware, and the compiler and collector
 * work it keeps alive), a fifth of a real-size task. The request is the
 * SDK's still where it matters: the endpoint, the path style and the signing
 * region are read once from a link the SDK presigns for the bucket (its own
 * rules: custom endpoints, path-style, dotted bucket names, FIPS and
 * dual-stack settings), the credentials are the client's (static, or its
 * default chain with its refreshing), and the SDK's SigV4 signer signs
 * every header. The body goes unsigned (`UNSIGNED-PAYLOAD`, as the SDK
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
  let target: Promise<Target> | undefined;
  const resolved = () => {
    target ??= resolveTarget(deps).catch((err: unknown) => {
      // No credentials yet, say: the next write asks again.
      target = undefined;
      throw err;
    });
    return target;
  };
  const put: PutObject = async (objectKey, bytes, contentType, signal) => {
    const where = await resolved();
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

/** The bucket's address and signing scope, read off a link the SDK presigns (no request made). */
async function resolveTarget(deps: PutObjectDeps): Promise<Target> {
  const link = new URL(
    await deps.getSignedUrl(
      deps.client,
      new deps.sdk.PutObjectCommand({ Bucket: deps.bucket, Key: PROBE }),
      { expiresIn: 60 },
    ),
  );
  const scope = (link.searchParams.get("X-Amz-Credential") ?? "").split("/");
  const [region, service] = [scope[2], scope[3]];
  if (!link.pathname.endsWith(PROBE) || !region || !service) {
    throw new Error(`the S3 SDK presigned an unexpected link for the bucket (${link.origin})`);
  }
  return {
    transport: link.protocol === "https:" ? https : http,
    hostname: link.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: link.port,
    host: link.host,
    pathBase: link.pathname.slice(0, -PROBE.length),
    signer: new deps.signerModule.SignatureV4({
      service,
      region,
      credentials: deps.client.config.credentials,
      sha256: NodeSha256,
      // S3 signs the path as sent (the SDK's `signingEscapePath: false` for S3).
      uriEscapePath: false,
      applyChecksum: false,
    }),
  };
}

/** One `PUT` of the object, signed; resolves on a 200, rejects with an SDK-shaped error. */
async function send(
  deps: PutObjectDeps,
  agents: Record<"http:" | "https:", http.Agent>,
  where: Target,
  objectKey: string,
  bytes: Buffer,
  contentType: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  const path = where.pathBase + objectKey;
  const signed = await where.signer.sign({
    method: "PUT",
    protocol: where.transport === https ? "https:" : "http:",
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
  const agent = agents[where.transport === https ? "https:" : "http:"];
  await new Promise<void>((resolve, reject) => {
    const req = where.transport.request(
      {
        agent,
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

/** What the signer hashes. */
type SourceData = string | ArrayBuffer | ArrayBufferView;

const bytesOf = (data: SourceData): BinaryLike =>
  typeof data === "string"
    ? data
    : data instanceof ArrayBuffer
      ? new Uint8Array(data)
      : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);

/** SHA-256 and its HMAC as the signer asks for them, on Node's own crypto. */
class NodeSha256 {
  private readonly hash;

  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash("sha256") : createHmac("sha256", bytesOf(secret));
  }

  update(data: SourceData): void {
    this.hash.update(bytesOf(data));
  }

  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
}
