import { createHmac, hkdfSync } from "node:crypto";

/** What each derived key is for; one root secret, never used directly. */
export type ForwardKeyPurpose = "key-hash" | "credential-seal";

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
