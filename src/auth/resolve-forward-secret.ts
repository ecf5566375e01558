import { randomBytes } from "node:crypto";
import { chmod, open, readFile, stat } from "node:fs/promises";
import type { Logger } from "pino";
import { ConfigError } from "../config/config-error.js";
import type { TaskStoreDeployment } from "../config/deployment.js";
import { FORWARD_SECRET_META_KEY } from "./forward-secret.js";

/** What resolving the secret needs of the task store: the place earlier versions kept it. */
export interface ForwardSecretMeta {
  getMeta(key: string): Promise<string | undefined>;
  deleteMeta(key: string): Promise<void>;
}

/** Options of {@link resolveForwardSecret}. */
export interface ResolveForwardSecretOptions {
  /** `auth.forward.secret` (required on Redis: the config refuses Redis without it). */
  configured: string | undefined;
  /** Where the task store is: beside a SQLite file, the secret has a file of its own. */
  taskStore: TaskStoreDeployment;
  meta: ForwardSecretMeta;
  logger: Logger;
}

/** Shortest secret accepted from a file, as from `auth.forward.secret`. */
const MIN_SECRET_LENGTH = 32;

/** `…/sidecar.db` -> the secret's file beside it, `…/sidecar.db.forward-secret`. */
export function forwardSecretFile(taskStore: TaskStoreDeployment): string | undefined {
  return taskStore.kind === "sqlite" ? `${taskStore.file}.forward-secret` : undefined;
}

/**
 * Forward mode's root secret, resolved at start-up, never kept beside the
 * keys it seals:
 *
 * - `auth.forward.secret` when set;
 * - on SQLite, a file of its own beside the database (`<db>.forward-secret`,
 *   mode 0600), generated on first start;
 * - on `memory://`, a random one in memory (nothing outlives the process).
 *
 * Earlier versions generated the secret and kept it in the task store. Such a
 * secret is moved to the SQLite store's file (written and synced before it
 * leaves the store), so the sealed keys of tasks in flight still open and
 * owners stay the same. Beside a configured secret it is deleted; if it was
 * another one, the tasks it sealed cannot be opened any more, which is said
 * once in the log.
 * @throws ConfigError for a secret file that cannot be read or is too short
 */
export async function resolveForwardSecret(options: ResolveForwardSecretOptions): Promise<string> {
  const { configured, meta, logger } = options;
  const file = forwardSecretFile(options.taskStore);
  let secret: string;
  if (configured !== undefined) {
    secret = configured;
  } else if (file) {
    secret = (await readSecretFile(file, logger)) ?? (await createSecretFile(file, meta));
  } else {
    return randomBytes(48).toString("base64url");
  }
  const kept = await meta.getMeta(FORWARD_SECRET_META_KEY);
  if (kept !== undefined) {
    await meta.deleteMeta(FORWARD_SECRET_META_KEY);
    if (kept !== secret) {
      logger.warn(
        "deleted a forward secret an earlier version kept in the task store: unfinished forward " +
          "tasks sealed with it fail credential_unavailable, and tasks from before belong to " +
          "other owners (see docs/forward-mode.md, the forward secret)",
      );
    }
  }
  return secret;
}

/** The secret in `file`, `undefined` when there is no such file. */
async function readSecretFile(file: string, logger: Logger): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new ConfigError([
      `auth.forward.secret: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? err})`,
    ]);
  }
  const secret = text.trim();
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new ConfigError([
      `auth.forward.secret: ${file} must hold a secret of at least ${MIN_SECRET_LENGTH} characters`,
    ]);
  }
  if (((await stat(file)).mode & 0o077) !== 0) {
    logger.warn({ file }, "the forward secret's file is readable by others; chmod 600 it");
  }
  return secret;
}

/**
 * Writes the secret the store kept (an earlier version's) or a new one to
 * `file`, readable by this user only, synced to disk before anything else
 * relies on it.
 */
async function createSecretFile(file: string, meta: ForwardSecretMeta): Promise<string> {
  const secret =
    (await meta.getMeta(FORWARD_SECRET_META_KEY)) ?? randomBytes(48).toString("base64url");
  const handle = await open(file, "wx", 0o600);
  try {
    await handle.writeFile(`${secret}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await chmod(file, 0o600);
  return secret;
}
