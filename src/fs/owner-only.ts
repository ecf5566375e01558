import { closeSync, mkdirSync, openSync } from "node:fs";
import { chmod, lstat, mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";

/*
 * Files the service creates hold what others must not read (the SQLite
 * database keeps the link-signing secret; image files are users' images), so
 * they are made for their owner only, whatever the umask: a mode given at
 * creation can only lose bits to the umask, never gain them.
 */

/** Mode of every file the service creates. */
export const OWNER_FILE_MODE = 0o600;
/** Mode of every directory the service creates. */
export const OWNER_DIR_MODE = 0o700;

/** The bits a file or directory must not have: any for group or others. */
const SHARED_BITS = 0o077;

/** Creates `dir` and its missing parents, owner-only; an existing one is left as it is. */
export async function makeOwnerDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: OWNER_DIR_MODE });
}

/** {@link makeOwnerDir}, synchronous. */
export function makeOwnerDirSync(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: OWNER_DIR_MODE });
}

/** Creates `file` empty and owner-only if it does not exist; an existing one is left as it is. */
export function createOwnerFileSync(file: string): void {
  closeSync(openSync(file, "a", OWNER_FILE_MODE));
}

/** What {@link tightenPaths} and {@link tightenTree} did. */
export interface Tightened {
  /** Files and directories whose group and other bits were removed. */
  tightened: number;
  /** Ones that could not be changed (not this user's, a read-only mount). */
  failed: number;
}

/**
 * Removes the group and other bits of each path that exists (what an earlier
 * release created under a permissive umask). Symbolic links are left alone,
 * never followed.
 */
export async function tightenPaths(paths: readonly string[]): Promise<Tightened> {
  const result: Tightened = { tightened: 0, failed: 0 };
  for (const path of paths) await tighten(path, result);
  return result;
}

/**
 * {@link tightenPaths} on `root` and everything below it, the root last; a
 * root that is already owner-only is taken as walked (by an earlier start,
 * or made by this release) and nothing below it is looked at, so that only
 * the first start after an upgrade walks an image folder of any size.
 */
export async function tightenTree(root: string): Promise<Tightened> {
  const result: Tightened = { tightened: 0, failed: 0 };
  let info;
  try {
    info = await lstat(root);
  } catch {
    return result; // absent: nothing to tighten
  }
  if (info.isSymbolicLink() || (info.mode & SHARED_BITS) === 0) return result;
  if (!info.isDirectory()) {
    await tighten(root, result);
    return result;
  }
  const pending = [root];
  for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
    if (dir !== root && !(await tighten(dir, result))) continue;
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      continue; // gone meanwhile, or not readable: nothing below it to change
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) pending.push(path);
      else if (entry.isFile()) await tighten(path, result);
    }
  }
  // Last: an interrupted walk leaves the root as it was, and the next start walks again.
  await tighten(root, result);
  return result;
}

/** Tightens one path; resolves whether it is a directory (to walk into). */
async function tighten(path: string, result: Tightened): Promise<boolean> {
  let info;
  try {
    info = await lstat(path);
  } catch {
    return false; // absent: nothing to tighten
  }
  if (info.isSymbolicLink()) return false;
  if ((info.mode & SHARED_BITS) !== 0) {
    try {
      await chmod(path, info.mode & 0o7700 & ~SHARED_BITS);
      result.tightened += 1;
    } catch {
      result.failed += 1;
    }
  }
  return info.isDirectory();
}

/** Says in the log what {@link tightenPaths} or {@link tightenTree} did to `what`, if anything. */
export function reportTightened(
  logger: { warn(fields: object, message: string): void },
  what: string,
  result: Tightened,
): void {
  if (result.tightened > 0) {
    logger.warn(
      { tightened: result.tightened },
      `${what}: ${result.tightened} files or directories were readable by other users; made them owner-only (0600, directories 0700)`,
    );
  }
  if (result.failed > 0) {
    logger.warn(
      { failed: result.failed },
      `${what}: ${result.failed} files or directories are readable by other users and could not be changed (chmod go-rwx them)`,
    );
  }
}
