/** The prefix Standard Webhooks (and Svix) put before a base64 signing secret. */
export const WEBHOOK_SECRET_PREFIX = "whsec_";

/** Standard Webhooks asks for keys of 24 to 64 bytes; Svix generates 24. */
const MIN_KEY_BYTES = 24;
const MAX_KEY_BYTES = 64;

/**
 * What is wrong with `secret` as a webhook signing secret, or `undefined` when
 * it is a good one: `whsec_` and the canonical (padded) base64 of 24 to 64
 * bytes. Canonical, because receivers decode it with strict decoders (the
 * `standardwebhooks` package refuses unpadded base64): a secret Node's lenient
 * decoder accepted could then sign with a key no receiver can rebuild.
 */
export function webhookSecretProblem(secret: string): string | undefined {
  if (!secret.startsWith(WEBHOOK_SECRET_PREFIX)) {
    return `must start with ${WEBHOOK_SECRET_PREFIX} followed by base64`;
  }
  const encoded = secret.slice(WEBHOOK_SECRET_PREFIX.length);
  const key = Buffer.from(encoded, "base64");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(encoded) || key.toString("base64") !== encoded) {
    return `must be ${WEBHOOK_SECRET_PREFIX} followed by standard, padded base64`;
  }
  if (key.length < MIN_KEY_BYTES || key.length > MAX_KEY_BYTES) {
    return `must encode ${MIN_KEY_BYTES} to ${MAX_KEY_BYTES} bytes after ${WEBHOOK_SECRET_PREFIX} (it encodes ${key.length})`;
  }
  return undefined;
}

/**
 * The HMAC key of a `whsec_` secret: the bytes its base64 part decodes to.
 * @throws Error when the secret is malformed (the config schema refuses those first).
 */
export function webhookSigningKey(secret: string): Buffer {
  const problem = webhookSecretProblem(secret);
  if (problem) throw new Error(`webhooks.secret ${problem}`);
  return Buffer.from(secret.slice(WEBHOOK_SECRET_PREFIX.length), "base64");
}
