import * as crypto from "node:crypto";
import type { Config } from "../config/config-schema.js";
import type { Principal } from "./principal.js";

/**
 * One-shot sha256 hex: `crypto.hash` (Node 20.12+, 21.7+) skips the Hash
 * object createHash builds, and this runs on every request a static key
 * authenticates. Read off the namespace so an older runtime falls back.
 */
const sha256Hex: (secret: string) => string =
  typeof crypto.hash === "function"
    ? (secret) => crypto.hash("sha256", secret, "hex")
    : (secret) => crypto.createHash("sha256").update(secret).digest("hex");

/** A key as logs name it when it has no `name`: `key_` and 12 hex characters of its SHA-256. */
export function keyFingerprint(sha256: string): string {
  return `key_${sha256.slice(0, 12)}`;
}

/** sha256 hex of a secret: the only form in which keys are kept or compared. */
export function hashSecret(secret: string): string {
  return sha256Hex(secret);
}

/**
 * Looks keys up by their hash, so the table built from the configuration and
 * every subject derived from it hold no usable key. A bearer that matched is
 * remembered as sent, so each configured key is hashed once per process, not
 * once per request: that map holds at most the configured keys themselves
 * (which the configuration holds anyway), never a token that matched nothing.
 */
export function createStaticKeyLookup(
  keys: Config["auth"]["keys"],
): (key: string) => Principal | undefined {
  const table = new Map<string, Principal>();
  for (const entry of keys) {
    const hash = hashSecret(entry.key);
    const subject = `key:${hash.slice(0, 32)}`;
    const principal: Principal = {
      subject,
      group: entry.group,
      keyName: entry.name ?? keyFingerprint(hash),
    };
    if (entry.webhookUrl) principal.webhookUrl = entry.webhookUrl;
    table.set(hash, principal);
  }
  const matched = new Map<string, Principal>();
  return (key) => {
    const known = matched.get(key);
    if (known) return known;
    const principal = table.get(hashSecret(key));
    if (principal) matched.set(key, principal);
    return principal;
  };
}
