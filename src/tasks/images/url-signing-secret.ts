import { hkdfSync, randomBytes } from "node:crypto";
import type { Config } from "../../config/config-schema.js";
import { ConfigError } from "../../config/config-error.js";
import { configSecrets } from "../../logging/secret-scrubber.js";
import type { TaskStore } from "../core/task-store.js";

/** HKDF's `info`: a secret made for this purpose only, unlike any other the config yields. */
const PURPOSE = "image-task-sidecar url-signing-secret v1";

/**
 * The secret image URLs are signed with: `server.urlSigningSecret` when set.
 * Otherwise, on a store one process owns (memory, SQLite), a random one made
 * once and kept in the store. On a store replicas share (Redis), one derived
 * (HKDF-SHA256) from the secrets of the configuration every replica runs
 * with: the same on every replica and after Redis lost its data (a restart
 * without persistence), where one kept in Redis would change under links
 * already handed out. A rotated key or secret changes it too (set
 * `server.urlSigningSecret` to keep links through rotations).
 * @throws ConfigError on a shared store whose configuration holds no secret at all
 */
export async function urlSigningSecret(config: Config, store: TaskStore): Promise<string> {
  const configured = config.server.urlSigningSecret;
  if (configured !== undefined) return configured;
  if (!config.deployment.shared) {
    return store.getOrSetMeta("url-signing-secret", () => randomBytes(32).toString("base64url"));
  }
  const material = [...configSecrets(config)].sort();
  if (material.length === 0) {
    throw new ConfigError([
      "server.urlSigningSecret: required with a shared store whose configuration holds no other " +
        "secret to derive it from: every replica must sign image links alike; make one with " +
        "`openssl rand -base64 32`",
    ]);
  }
  const key = Buffer.from(material.join("\n"));
  const salt = Buffer.from(config.store.prefix);
  return Buffer.from(hkdfSync("sha256", key, salt, PURPOSE, 32)).toString("base64url");
}
