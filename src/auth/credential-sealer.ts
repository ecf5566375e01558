import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";
import { deriveForwardKey } from "./forward-secret.js";

/** Format version: the first part of every sealed value. */
const VERSION = "v1";
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Unsealing failed: tampered, sealed with another secret or for another context, or not ours. */
export class CredentialSealError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CredentialSealError";
  }
}

/**
 * Encrypts a client's key for the time its task is unfinished (forward mode).
 * The sealed form is `v1.<kid>.<iv>.<ciphertext>.<tag>` (base64url parts):
 * AES-256-GCM, a random 96-bit IV per seal, the version, key id and caller's
 * context (the task id) authenticated with it, so a sealed key moved to
 * another record, or any part changed, does not open. The key id names the
 * secret it was sealed with, so a later rotation can keep older ones.
 */
export interface CredentialSealer {
  /**
   * @param credential the client's key
   * @param context what the sealed value belongs to (the task id); needed again to unseal
   */
  seal(credential: string, context: string): Promise<string>;
  /**
   * Fails closed: anything but an intact value sealed by this secret for this
   * context throws.
   * @throws CredentialSealError
   */
  unseal(sealed: string, context: string): Promise<string>;
}

interface SealKey {
  kid: string;
  key: Buffer;
}

/**
 * @param secret the forward root secret (`auth.forward.secret`, or the one
 *   kept in the store: see `createForwardSecretSource`); resolved on first use
 */
export function createCredentialSealer(secret: () => Promise<string>): CredentialSealer {
  let current: Promise<SealKey> | undefined;
  const sealKey = () =>
    (current ??= secret()
      .then((root) => {
        const key = deriveForwardKey(root, "credential-seal");
        // An HMAC of the key, not the key: names it without revealing anything.
        const kid = createHmac("sha256", key).update("key-id").digest("base64url").slice(0, 8);
        return { kid, key };
      })
      .catch((err: unknown) => {
        current = undefined;
        throw err;
      }));

  const aad = (kid: string, context: string) => Buffer.from(`${VERSION}.${kid}.${context}`);

  return {
    async seal(credential, context) {
      const { kid, key } = await sealKey();
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(aad(kid, context));
      const ciphertext = Buffer.concat([cipher.update(credential, "utf8"), cipher.final()]);
      return [
        VERSION,
        kid,
        iv.toString("base64url"),
        ciphertext.toString("base64url"),
        cipher.getAuthTag().toString("base64url"),
      ].join(".");
    },

    async unseal(sealed, context) {
      const parts = typeof sealed === "string" ? sealed.split(".") : [];
      if (parts.length !== 5 || parts[0] !== VERSION) {
        throw new CredentialSealError("not a sealed credential of a known version");
      }
      const [, kid, ivText, ciphertextText, tagText] = parts as [
        string,
        string,
        string,
        string,
        string,
      ];
      const { kid: currentKid, key } = await sealKey();
      if (kid !== currentKid) {
        throw new CredentialSealError("sealed with another secret");
      }
      const iv = Buffer.from(ivText, "base64url");
      const tag = Buffer.from(tagText, "base64url");
      // GCM would accept a shortened tag, which is easier to forge: only the full length.
      if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) {
        throw new CredentialSealError("malformed sealed credential");
      }
      try {
        const decipher = createDecipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES });
        decipher.setAAD(aad(kid, context));
        decipher.setAuthTag(tag);
        return Buffer.concat([
          decipher.update(Buffer.from(ciphertextText, "base64url")),
          decipher.final(),
        ]).toString("utf8");
      } catch {
        throw new CredentialSealError("sealed credential failed authentication");
      }
    },
  };
}
