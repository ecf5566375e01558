import { createHash, randomBytes } from "node:crypto";
import { constants, promises as fs } from "node:fs";
import path from "node:path";
import { ImageFileSinkError } from "./image-file-sink-error.js";

const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;

/** `dir`/`name`, refused when `name` would lead anywhere but straight into `dir`. */
export function entryPath(dir: string, name: string): string {
  const full = path.join(dir, name);
  // Belt and braces: names come from a validated task id, but never leave `dir` regardless.
  if (path.dirname(full) !== dir || path.basename(full) !== name) {
    throw new ImageFileSinkError(`Refused to write ${JSON.stringify(name)}.`);
  }
  return full;
}

/** Writes under a fresh temporary name, then links it into place; false if `target` exists. */
export async function publishExclusive(
  dir: string,
  target: string,
  bytes: Uint8Array,
): Promise<boolean> {
  const temp = await writeTemp(dir, target, bytes);
  try {
    await fs.link(temp, target);
    return true;
  } catch (error) {
    if (errorCode(error) === "EEXIST") return false;
    throw new ImageFileSinkError(`Could not save ${target} (${describe(error)}).`);
  } finally {
    await fs.rm(temp, { force: true });
  }
}

async function writeTemp(dir: string, target: string, bytes: Uint8Array): Promise<string> {
  const temp = path.join(dir, `.${path.basename(target)}.${randomBytes(6).toString("hex")}.tmp`);
  let created = false;
  try {
    const handle = await fs.open(
      temp,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | O_NOFOLLOW,
      0o644,
    );
    created = true;
    try {
      await handle.writeFile(bytes);
      await handle.sync();
    } finally {
      await handle.close();
    }
    return temp;
  } catch (error) {
    if (created) await fs.rm(temp, { force: true }).catch(() => undefined);
    throw new ImageFileSinkError(`Could not write into ${dir} (${describe(error)}).`);
  }
}

/** The file's bytes if it is a regular file (not followed through a link), else undefined. */
export async function readRegularFile(file: string): Promise<Uint8Array | undefined> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, constants.O_RDONLY | O_NOFOLLOW);
  } catch (error) {
    if (errorCode(error) === "ENOENT") return undefined;
    if (errorCode(error) === "ELOOP") throw linkError(file);
    throw new ImageFileSinkError(`Cannot read ${file} (${describe(error)}).`);
  }
  try {
    if (!(await handle.stat()).isFile()) throw linkError(file);
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

function linkError(file: string): ImageFileSinkError {
  return new ImageFileSinkError(
    `${file} is a link or not a regular file; it is left untouched and nothing was written there.`,
  );
}

/** Hex SHA-256 of `bytes`. */
export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}

/** A file system error as a message names it: its code, else its message. */
export function describe(error: unknown): string {
  return errorCode(error) ?? (error instanceof Error ? error.message : String(error));
}
