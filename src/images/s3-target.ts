import { createHash, createHmac, type BinaryLike } from "node:crypto";
import type * as S3Sdk from "@aws-sdk/client-s3";
import type { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import type * as SignerModule from "@smithy/signature-v4";
import type { SignatureV4 } from "@smithy/signature-v4";

/** Where a bucket's objects are and how requests there are signed, as the SDK resolved it. */
export interface S3Target {
  protocol: "http:" | "https:";
  /** Without an IPv6 address's brackets. */
  hostname: string;
  /** "" for the protocol's own port. */
  port: string;
  /** The `Host` header: the host name, and the port when it is not the protocol's own. */
  host: string;
  /** The bucket's path up to the key (path-style: `/bucket/`; virtual-hosted: `/`). */
  pathBase: string;
  signer: SignatureV4;
}

/**
 * A request on an object of the target, as the signer takes it: the object's
 * path after the bucket's, `host` and an unsigned payload among its headers.
 */
export function signableRequest(
  target: S3Target,
  method: "GET" | "PUT",
  objectKey: string,
  headers: Record<string, string> = {},
) {
  return {
    method,
    protocol: target.protocol,
    hostname: target.hostname,
    ...(target.port ? { port: Number(target.port) } : {}),
    path: target.pathBase + objectKey,
    query: {},
    headers: { ...headers, host: target.host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD" },
  };
}

/** Dependencies of {@link createS3Target}: the store's SDK, its client and bucket. */
export interface S3TargetDeps {
  sdk: typeof S3Sdk;
  client: S3Sdk.S3Client;
  signerModule: typeof SignerModule;
  getSignedUrl: typeof getSignedUrl;
  bucket: string;
}

/** The key the target is resolved with; any key of checked characters is addressed alike. */
const PROBE = "put-object-probe";

/**
 * The bucket as the SDK addresses it, resolved on first use and kept: the
 * endpoint, the path style and the signing region are read off a link the
 * SDK presigns for the bucket (no request is made; its own rules for custom
 * endpoints, dotted bucket names, FIPS and dual-stack settings apply), and a
 * SigV4 signer from the SDK's own package signs with the client's
 * credentials (static, or its chain, refreshed as it refreshes them). A
 * failure (no credentials yet, say) is not kept: the next use asks again.
 */
export function createS3Target(deps: S3TargetDeps): () => Promise<S3Target> {
  let target: Promise<S3Target> | undefined;
  return () => {
    target ??= resolveTarget(deps).catch((err: unknown) => {
      target = undefined;
      throw err;
    });
    return target;
  };
}

/** The bucket's address and signing scope, read off a link the SDK presigns (no request made). */
async function resolveTarget(deps: S3TargetDeps): Promise<S3Target> {
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
    protocol: link.protocol === "https:" ? "https:" : "http:",
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
