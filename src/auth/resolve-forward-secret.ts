import { randomBytes } from "node:crypto";
import { chmod, open, readFile } from "node:fs/promises";
import type { Logger } from "pino";
import { ConfigError } from "../config/config-error.js";
import { OWNER_FILE_MODE, reportTightened, tightenPaths } from "../fs/owner-only.js";

/**
 * Where a task backend keeps forward mode's secret when `auth.forward.secret`
 * is not set (see `TaskBackend.forwardSecret`): never beside the keys it
 * seals, so never in the task store itself.
 */
export interface ForwardSecretHome {
  /** The secret kept there, `undefined` when there is none yet. */
  read(): Promise<string | undefined>;
  /** Keeps `secret` as the one to read from now on; resolves it. */
  keep(secret: string): Promise<string>;
}

/** Options of {@link resolveForwardSecret}. */
export interface ResolveForwardSecretOptions {
  /** `auth.forward.secret`. */
  configured: string | undefined;
  /**
   * Where the backend keeps a generated one; undefined where it can keep none
   * (a store several replicas share), and `configured` is required.
   */
  home: ForwardSecretHome | undefined;
}

/** Shortest secret accepted from a file, as from `auth.forward.secret`. */
const MIN_SECRET_LENGTH = 32;

/**
 * Forward mode's root secret, resolved at start-up: `auth.forward.secret`
 * when set, else the one the backend's home keeps, generated on first start
 * (a file of its own beside a SQLite database; the process's memory beside
 * `memory://`, where nothing outlives the process).
 *
 * @throws ConfigError when neither is there (the config refuses that already),
 *   or for a secret file that cannot be read or is too short
 */
export async function resolveForwardSecret(options: ResolveForwardSecretOptions): Promise<string> {
  const { configured, home } = options;
  if (configured !== undefined) return configured;
  if (!home) {
    throw new ConfigError([
      "auth.forward.secret: required with a store several replicas share (make one with `openssl rand -base64 48`)",
    ]);
  }
  return (await home.read()) ?? (await home.keep(randomBytes(48).toString("base64url")));
}

/** A home in this process's memory: a new secret each start. */
export function processForwardSecretHome(): ForwardSecretHome {
  let kept: string | undefined;
  return {
    read: async () => kept,
    keep: async (secret) => (kept = secret),
  };
}

/**
 * A home in `file`, readable by this user only (0600, tightened when an
 * earlier release left it wider), written and synced on first start.
 */
export function fileForwardSecretHome(file: string, logger: Logger): ForwardSecretHome {
  return {
    read: () => readForwardSecretFile(file, logger),
    keep: (secret) => writeForwardSecretFile(file, secret),
  };
}

/** The secret in `file`, `undefined` when there is no such file. */
async function readForwardSecretFile(file: string, logger: Logger): Promise<string | undefined> {
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
async function writeForwardSecretFile(file: string, secret: string): Promise<string> {
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
