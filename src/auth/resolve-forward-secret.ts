import { randomBytes } from "node:crypto";
import { chmod, open, readFile } from "node:fs/promises";
import type { Logger } from "pino";
import { ConfigError } from "../config/config-error.js";
import type { TaskStoreDeployment } from "../config/deployment.js";
import { OWNER_FILE_MODE, reportTightened, tightenPaths } from "../fs/owner-only.js";

/** Options of {@link resolveForwardSecret}. */
export interface ResolveForwardSecretOptions {
  /** `auth.forward.secret` (required on Redis: the config refuses Redis without it). */
  configured: string | undefined;
  /** Where the task store is: beside a SQLite file, the secret has a file of its own. */
  taskStore: TaskStoreDeployment;
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
 * @throws ConfigError for a secret file that cannot be read or is too short
 */
export async function resolveForwardSecret(options: ResolveForwardSecretOptions): Promise<string> {
  const { configured, logger } = options;
  if (configured !== undefined) return configured;
  const file = forwardSecretFile(options.taskStore);
  if (!file) return randomBytes(48).toString("base64url");
  return (
    (await readForwardSecretFile(file, logger)) ??
    (await writeForwardSecretFile(file, randomBytes(48).toString("base64url")))
  );
}

/** The secret in `file`, `undefined` when there is no such file. */
export async function readForwardSecretFile(
  file: string,
  logger: Logger,
): Promise<string | undefined> {
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
  reportTightened(logger, `auth.forward.secret: ${file}`, await tightenPaths([file]));
  return secret;
}

/**
 * Writes `secret` to a new `file`, readable by this user only, synced to
 * disk before anything else relies on it; resolves the secret.
 */
export async function writeForwardSecretFile(file: string, secret: string): Promise<string> {
  const handle = await open(file, "wx", OWNER_FILE_MODE);
  try {
    await handle.writeFile(`${secret}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await chmod(file, OWNER_FILE_MODE);
  return secret;
}
