import { createHmac, hkdfSync, randomBytes } from "node:crypto";
import { AppError } from "../http/app-error.js";

/** The store's meta key under which a generated forward secret is kept. */
export const FORWARD_SECRET_META_KEY = "forward-secret";

/** What each derived key is for; one root secret, never used directly. */
export type ForwardKeyPurpose = "key-hash" | "credential-seal";

/**
 * The forward mode's root secret, resolved once: `auth.forward.secret` when
 * set, else a random one generated on first use and kept in the store (so
 * owners and sealed keys survive restarts and are the same on every replica).
 * A store that cannot be reached is `store_unavailable`, and the next call
 * tries again.
 *
 * @param configured `auth.forward.secret`
 * @param getOrSetMeta the store's `getOrSetMeta` (kept to one function so any store fits)
 */
export function createForwardSecretSource(
  configured: string | undefined,
  getOrSetMeta: (key: string, create: () => string) => Promise<string>,
): () => Promise<string> {
  if (configured !== undefined) {
    const resolved = Promise.resolve(configured);
    return () => resolved;
  }
  let pending: Promise<string> | undefined;
  return () =>
    (pending ??= getOrSetMeta(FORWARD_SECRET_META_KEY, () =>
      randomBytes(32).toString("base64url"),
    ).catch((err: unknown) => {
      pending = undefined;
      throw new AppError("store_unavailable", "The task store cannot be reached; retry shortly.", {
        cause: err,
      });
    }));
}

/** A 32-byte key for one purpose, derived from the root secret with HKDF-SHA256. */
export function deriveForwardKey(secret: string, purpose: ForwardKeyPurpose): Buffer {
  return Buffer.from(hkdfSync("sha256", secret, "image-task-sidecar/forward", `${purpose}/v1`, 32));
}

/**
 * Keyed hash of a client's key (HMAC-SHA256 with the `key-hash` key), hex.
 * Without the secret it cannot be recomputed from a guessed key, so an owner
 * id or a cache entry gives nothing away.
 */
export function createKeyHasher(secret: () => Promise<string>): (key: string) => Promise<string> {
  let hmacKey: Promise<Buffer> | undefined;
  return async (key) => {
    const resolved = await (hmacKey ??= secret()
      .then((root) => deriveForwardKey(root, "key-hash"))
      .catch((err: unknown) => {
        hmacKey = undefined;
        throw err;
      }));
    return createHmac("sha256", resolved).update(key).digest("hex");
  };
}
