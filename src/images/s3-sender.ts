import * as http from "node:http";
import * as https from "node:https";
import { signableRequest, type S3Target } from "./s3-target.js";

/** Dependencies of {@link createS3Sender}: where objects are, and how long to wait. */
export interface S3SenderDeps {
  /** The bucket as the SDK resolved it (see `createS3Target`). */
  target: () => Promise<S3Target>;
  /** Default 5 s and 30 s, as the SDK's own requests. */
  connectTimeoutMs: number;
  idleTimeoutMs: number;
}

/** One request on an object. */
export interface S3ObjectRequest {
  method: "GET" | "PUT";
  /** The key as the store addresses it (its prefix included), of checked characters only. */
  objectKey: string;
  /** Headers besides `host` and the signature's; `x-amz-content-sha256` is UNSIGNED-PAYLOAD. */
  headers?: Record<string, string>;
  body?: Buffer;
  signal?: AbortSignal | undefined;
}

/**
 * Sends a signed request on an object; resolves with a 2xx answer (its body
 * not read yet), rejects with an error shaped as the SDK's.
 */
export type S3Send = (request: S3ObjectRequest) => Promise<http.IncomingMessage>;

/** Bytes of an error answer read for its `<Code>`. */
const MAX_ERROR_BYTES = 64 * 1024;

/**
 * Requests on a bucket's objects without the SDK's per-call pipeline, which
 * cost ~2 ms of CPU a call (its middleware, and the compiler and collector
 * work it keeps alive). What matters is still the SDK's: the endpoint, path
 * style, signing region and credentials (`createS3Target`), and its SigV4
 * signer, which signs every header. Bodies go unsigned (`UNSIGNED-PAYLOAD`,
 * as the SDK sends a streamed body): hashing a 3 MB image for the signature
 * would cost another fifth of a task; S3, R2, MinIO and Ceph take it, TLS
 * covers the bytes on an https endpoint, and the signature still covers the
 * headers, `Content-Length` included. Connections are kept alive (through
 * the SDK, a body from 2 MiB went with `Expect: 100-continue` on a
 * connection of its own, never reused: a handshake per image). A failure is
 * shaped as the SDK's errors (`name` = S3's `<Code>`, or `NotFound` for a
 * bare 404; `$metadata.httpStatusCode`), so `s3StoreFailure` reads both.
 */
export function createS3Sender(deps: S3SenderDeps): { send: S3Send; close(): void } {
  const agents = {
    "http:": new http.Agent({ keepAlive: true, maxSockets: 50 }),
    "https:": new https.Agent({ keepAlive: true, maxSockets: 50 }),
  };
  return {
    send: async (request) => {
      const where = await deps.target();
      return sendOnce(deps, where, agents[where.protocol], request);
    },
    close() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}

async function sendOnce(
  deps: S3SenderDeps,
  where: S3Target,
  agent: http.Agent,
  request: S3ObjectRequest,
): Promise<http.IncomingMessage> {
  const unsigned = signableRequest(where, request.method, request.objectKey, {
    ...request.headers,
    ...(request.body ? { "content-length": String(request.body.byteLength) } : {}),
  });
  const { path } = unsigned;
  const signed = await where.signer.sign(unsigned);
  const transport = where.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = transport.request(
      {
        agent,
        hostname: where.hostname,
        ...(where.port ? { port: where.port } : {}),
        method: request.method,
        path,
        headers: signed.headers,
        ...(request.signal ? { signal: request.signal } : {}),
        timeout: deps.idleTimeoutMs,
      },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) resolve(res);
        else refusal(res, reject);
      },
    );
    watchConnect(req, deps.connectTimeoutMs);
    req.on("timeout", () => req.destroy(timeoutError("the store went silent")));
    req.on("error", reject);
    req.end(request.body);
  });
}

/** Rejects with S3's code, read from the error answer's body. */
function refusal(res: http.IncomingMessage, reject: (err: unknown) => void): void {
  const status = res.statusCode ?? 0;
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
        name: code ?? (status === 404 ? "NotFound" : "Unknown"),
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

/** The wait before the one retry of a failure that may heal (as the SDK's first backoff). */
const RETRY_DELAY_MS = 100;

/**
 * Runs `attempt`, and once more after 100 ms when it failed in a way a
 * second try may heal (the network's, a timeout, a 5xx or a 429), as the
 * SDK's `maxAttempts: 2` did; never after an abort.
 */
export async function withOneRetry<T>(
  attempt: () => Promise<T>,
  signal: AbortSignal | undefined,
): Promise<T> {
  try {
    return await attempt();
  } catch (err) {
    if (!mayHeal(err) || signal?.aborted) throw err;
    await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
    signal?.throwIfAborted();
    return attempt();
  }
}

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
