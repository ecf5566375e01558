import { ImageStoreError } from "./image-store-error.js";

/** A refusal of S3's that no retry heals: the field to fix and what it means. */
interface Refusal {
  field: string;
  reason: string;
}

/**
 * S3's error codes (as S3, R2, MinIO and Ceph's gateway send them) that mean
 * the configuration is wrong, by the field a person would change.
 */
const REFUSALS: Record<string, (credentials: string) => Refusal> = {
  NoSuchBucket: () => ({ field: "images.url", reason: "the bucket does not exist" }),
  NotFound: () => ({ field: "images.url", reason: "the bucket does not exist" }),
  InvalidBucketName: () => ({ field: "images.url", reason: "the store refuses the bucket name" }),
  AllAccessDisabled: () => ({ field: "images.url", reason: "all access to the bucket is off" }),
  InvalidAccessKeyId: (credentials) => ({
    field: credentials,
    reason: "the store knows no such access key",
  }),
  SignatureDoesNotMatch: () => ({
    field: "images.s3.secretAccessKey",
    reason: "the store refused the request's signature: the secret does not belong to the key",
  }),
  AccessDenied: (credentials) => ({
    field: credentials,
    reason:
      "the key has no right to this: it needs s3:PutObject, s3:GetObject, s3:DeleteObject " +
      "and s3:ListBucket on the bucket and prefix",
  }),
  InvalidToken: () => ({ field: "images.s3.sessionToken", reason: "the session token is invalid" }),
  ExpiredToken: () => ({ field: "images.s3.sessionToken", reason: "the session token expired" }),
  AuthorizationHeaderMalformed: () => ({
    field: "images.s3.region",
    reason: "the store expects another region",
  }),
  PermanentRedirect: () => ({
    field: "images.s3.region",
    reason: "the bucket is in another region (or needs another endpoint)",
  }),
  CredentialsProviderError: () => ({
    field: "images.s3.accessKeyId",
    reason:
      "no credentials: set images.s3.accessKeyId and secretAccessKey, or give the AWS SDK's " +
      "chain some (AWS_ACCESS_KEY_ID, a profile, an instance or pod role)",
  }),
};

/** Network codes of a store that does not answer: it may come back. */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EPIPE",
  "TimeoutError",
]);

/** What the SDK's errors carry that this reads. */
interface SdkError {
  name?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number };
}

/**
 * An S3 SDK failure as an {@link ImageStoreError}: S3's own code, and whether
 * it can heal. A bare 403 (a `HeadBucket` has no body, so no code) is a
 * refusal of the credentials; any other 4xx is a refusal too; 5xx, 429, a
 * network error or a timeout may heal. An abort, and an error that is
 * neither the store's answer nor the network's, are passed on as they are.
 *
 * @param staticCredentials whether `images.s3.accessKeyId` is set (else the SDK's chain signs)
 */
export function s3StoreFailure(
  err: unknown,
  operation: string,
  staticCredentials: boolean,
): unknown {
  if (err instanceof ImageStoreError) return err;
  const { name, code, $metadata } = (err ?? {}) as SdkError;
  if (name === "AbortError") return err;
  const credentials = staticCredentials
    ? "images.s3.accessKeyId"
    : "images.s3.accessKeyId (unset: the AWS SDK's credential chain)";
  const status = $metadata?.httpStatusCode;
  const known = name && Object.hasOwn(REFUSALS, name) ? REFUSALS[name]!(credentials) : undefined;
  if (known)
    return new ImageStoreError(name!, true, known.field, known.reason, operation, { cause: err });
  const network = [code, name].find((value) => value && UNREACHABLE.has(value));
  // Not the store's answer nor the network's (a key refused before sending, a bug): as it is.
  if (!network && status === undefined) return err;
  if (network || status === undefined || status >= 500 || status === 429) {
    const shown = network ?? `HTTP ${status}`;
    return new ImageStoreError(
      shown,
      false,
      "images.s3.endpoint",
      "the image store did not answer",
      operation,
      { cause: err },
    );
  }
  if (status === 403) {
    return new ImageStoreError(
      name && name !== "Unknown" ? name : "HTTP 403",
      true,
      credentials,
      "the store refused the credentials or their rights",
      operation,
      { cause: err },
    );
  }
  return new ImageStoreError(
    name && name !== "Unknown" ? name : `HTTP ${status}`,
    true,
    "images.s3.endpoint",
    `the store refused the request (HTTP ${status}): is images.s3.endpoint an S3 endpoint?`,
    operation,
    { cause: err },
  );
}
