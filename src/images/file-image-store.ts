import { randomBytes } from "node:crypto";
import fs, {
  closeSync,
  constants,
  fstatSync,
  openSync,
  readSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  type Stats,
} from "node:fs";
import { access, readdir, rename, rmdir, stat, unlink } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { promisify } from "node:util";
import { canWriteDirect, writeFileDirect } from "../fs/direct-write.js";
import { isLocalFileSystem } from "../fs/local-file-system.js";
import { makeOwnerDir, makeOwnerDirSync, OWNER_FILE_MODE } from "../fs/owner-only.js";
import { checkKey, contentTypeOfKey, dayOf, dayOfKey } from "./image-keys.js";
import type { ImageObject, ImageStore, ListedObject } from "./image-store.js";
import { fileStoreFailure } from "./image-store-error.js";

/** Options of {@link createFileImageStore}. */
export interface FileImageStoreOptions {
  /** The root directory (created when missing). */
  dir: string;
  /**
   * Whether small files ({@link SMALL_FILE_BYTES} or less) are written and
   * read with synchronous calls, and folders made and files renamed so.
   * Default: when the directory lies on a local file system (ext4, XFS,
   * tmpfs, overlayfs...; see `fs/local-file-system.ts`), not on a network
   * mount, where a call may wait on the network.
   */
  inline?: boolean;
  /**
   * Whether a large image decoded into a page-aligned buffer (as a task's
   * are) is written past the page cache (`O_DIRECT`, see
   * `fs/direct-write.ts`); the store stops trying at the first file system
   * that refuses it. Default: as {@link inline}.
   */
  direct?: boolean;
}

/** How a store writes: see {@link FileImageStoreOptions}. */
interface WriteMode {
  inline: boolean;
  direct: boolean;
}

/**
 * The largest file written or read whole in one synchronous call on a local
 * file system; larger ones go through the thread pool, so that copying them
 * never holds the event loop. The same size is the most read into one buffer
 * (a larger image is streamed).
 */
const SMALL_FILE_BYTES = 256 * 1024;

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException).code === "ENOENT";

/**
 * Images as files under one directory (`file://`): keys are paths below it,
 * every file and folder the store creates owner-only (0600, 0700).
 * A write goes to a temporary file beside its target and is renamed over it,
 * so a reader (another replica on a shared mount too) never sees half an
 * image. The ETag is made of inode, size and modification time, as web
 * servers do: the same on every replica that mounts the directory, with no
 * hashing.
 */
export function createFileImageStore(options: FileImageStoreOptions): ImageStore {
  const root = resolve(options.dir);
  // Each call through the thread pool costs two thread wake-ups: on a virtual machine about
  // 80 µs of CPU, where the same call made synchronously on a local disk costs 5 to 40 (a small
  // image's write, mkdir + write + rename, 530 µs against 120; its read 340 against 15).
  const inline = options.inline ?? isLocalFileSystem(root);
  const mode: WriteMode = { inline, direct: options.direct ?? inline };
  return {
    backend: "file",
    put: (key, bytes) => failing("write", () => put(root, key, bytes, mode)),
    get: (key) => failing("read", () => (inline ? getInline(root, key) : get(root, key))),
    delete: (keys) => failing("delete", () => deleteKeys(root, keys)),
    list: (prefix) => list(root, prefix),
    ping: () =>
      failing("access", async () => {
        // The root must exist and be writable: a read-only mount fails here (EROFS).
        await makeOwnerDir(root);
        await access(root, constants.W_OK);
      }),
    check: () => failing("write", () => check(root, mode)),
    objectKey: (key) => checkKey(key),
    async close() {},
  };
}

const pathOf = (root: string, key: string) => join(root, checkKey(key));

/** Runs one operation; a file system failure becomes an `ImageStoreError`. */
async function failing<T>(operation: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    throw fileStoreFailure(err, operation);
  }
}

/**
 * {@link ImageStore.check}: a file written (as images are: a temporary file
 * renamed) and removed, in today's folder, which the day's sweep deletes
 * should the removal fail.
 */
async function check(root: string, mode: WriteMode): Promise<void> {
  const key = `${dayOf(Math.floor(Date.now() / 1000))}/check-${randomBytes(6).toString("hex")}.txt`;
  await put(root, key, Buffer.from("image-task-sidecar store check\n"), mode);
  await deleteKeys(root, [key]);
}

/** Times a write starts again when its folder vanished under it (another replica pruned it). */
const PUT_ATTEMPTS = 3;

async function put(root: string, key: string, bytes: Buffer, mode: WriteMode): Promise<void> {
  const path = pathOf(root, key);
  for (let attempt = 1; ; attempt += 1) {
    try {
      await (mode.inline ? putInline(path, bytes, mode) : putOnce(path, bytes));
      return;
    } catch (err) {
      // Several replicas share one directory: a folder that another one emptied and removed
      // between this write's mkdir and its file is made again, never reported as a failure.
      if (!isMissing(err) || attempt === PUT_ATTEMPTS) throw err;
    }
  }
}

/** Callback `writeFile`, promisified: the promise API's goes through a FileHandle, dearer. */
const writeWhole = promisify(fs.writeFile);

/**
 * Where a write goes before its rename: hidden beside its target (same file
 * system, so the rename is atomic); a crash leaves it in the task's
 * expiry-day folder, which the sweep deletes whole.
 */
const tempOf = (path: string) =>
  join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);

async function putOnce(path: string, bytes: Buffer): Promise<void> {
  await makeOwnerDir(dirname(path));
  const temp = tempOf(path);
  try {
    await writeWhole(temp, bytes, { mode: OWNER_FILE_MODE });
    await rename(temp, path);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
}

/**
 * {@link putOnce} on a local file system: the folder and the rename are
 * synchronous calls (no data moves), and a small file's write too; a large
 * one's copy into the page cache stays off the event loop.
 */
async function putInline(path: string, bytes: Buffer, mode: WriteMode): Promise<void> {
  makeOwnerDirSync(dirname(path));
  const temp = tempOf(path);
  try {
    if (bytes.length <= SMALL_FILE_BYTES) writeFileSync(temp, bytes, { mode: OWNER_FILE_MODE });
    else if (!(await putDirect(temp, bytes, mode))) {
      await writeWhole(temp, bytes, { mode: OWNER_FILE_MODE });
    }
    renameSync(temp, path);
  } catch (err) {
    try {
      unlinkSync(temp);
    } catch {
      // never written, or gone
    }
    throw err;
  }
}

/**
 * Writes a large file past the page cache when its buffer allows and the
 * store has not found its file system refusing; false when it did not.
 */
async function putDirect(temp: string, bytes: Buffer, mode: WriteMode): Promise<boolean> {
  if (!mode.direct || !canWriteDirect(bytes)) return false;
  if (await writeFileDirect(temp, bytes, OWNER_FILE_MODE)) return true;
  mode.direct = false;
  return false;
}

/*
 * Callback file calls, promisified: a FileHandle's promise API costs several
 * times their CPU per call.
 */
const openFd = promisify(fs.open);
const fstatFd = promisify(fs.fstat);
const readFd = promisify(fs.read);
const closeFd = promisify(fs.close);

async function get(root: string, key: string): Promise<ImageObject | undefined> {
  let fd: number;
  try {
    fd = await openFd(pathOf(root, key), "r");
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  let body: Readable | undefined;
  let whole: Buffer | undefined;
  try {
    const info = await fstatFd(fd);
    if (info.size <= SMALL_FILE_BYTES) {
      const bytes = Buffer.allocUnsafe(info.size);
      let read = 0;
      while (read < bytes.length) {
        const { bytesRead } = await readFd(fd, bytes, read, bytes.length - read, read);
        if (bytesRead === 0) break;
        read += bytesRead;
      }
      whole = bytes.subarray(0, read);
    } else {
      // The stream closes the descriptor when it ends or is destroyed.
      body = fs.createReadStream("", { fd, highWaterMark: SMALL_FILE_BYTES });
    }
    return imageObject(key, info, whole ?? body!);
  } finally {
    if (!body) await closeFd(fd).catch(() => undefined);
  }
}

/** {@link get} on a local file system: a small file is read with synchronous calls. */
async function getInline(root: string, key: string): Promise<ImageObject | undefined> {
  let fd: number;
  try {
    fd = openSync(pathOf(root, key), "r");
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  let body: Readable | undefined;
  try {
    const info = fstatSync(fd);
    if (info.size > SMALL_FILE_BYTES) {
      body = fs.createReadStream("", { fd, highWaterMark: SMALL_FILE_BYTES });
      return imageObject(key, info, body);
    }
    const bytes = Buffer.allocUnsafe(info.size);
    let read = 0;
    while (read < bytes.length) {
      const bytesRead = readSync(fd, bytes, read, bytes.length - read, read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    return imageObject(key, info, bytes.subarray(0, read));
  } finally {
    if (!body) closeSync(fd);
  }
}

/** A file as an {@link ImageObject}: read whole (`Buffer`), or its stream. */
function imageObject(key: string, info: Stats, content: Buffer | Readable): ImageObject {
  const whole = Buffer.isBuffer(content) ? content : undefined;
  return {
    body: whole ? Readable.from([whole], { objectMode: false }) : (content as Readable),
    ...(whole && { bytes: whole }),
    size: info.size,
    contentType: contentTypeOfKey(key),
    // The inode changes with every write (a rename), so a rewrite never keeps its tag.
    etag: `"${info.ino.toString(16)}-${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}"`,
  };
}

async function deleteKeys(root: string, keys: readonly string[]): Promise<void> {
  const dirs = new Set<string>();
  await Promise.all(
    keys.map(async (key) => {
      const path = pathOf(root, key);
      try {
        await unlink(path);
      } catch (err) {
        if (!isMissing(err)) throw err;
      }
      dirs.add(dirname(path));
    }),
  );
  for (const dir of dirs) await pruneEmpty(root, dir);
}

/**
 * Removes the folders a delete emptied, up to the root; a folder still in use
 * stays. A day folder goes only once its day is over: today's and later ones
 * are where other replicas sharing the directory write (their tasks' images,
 * the store check), and an empty one now is filled a moment later.
 */
async function pruneEmpty(root: string, dir: string): Promise<void> {
  const today = dayOf(Math.floor(Date.now() / 1000));
  while (dir.startsWith(`${root}/`)) {
    const folder = dir.slice(root.length + 1);
    const day = folder.includes("/") ? undefined : dayOfKey(`${folder}/`);
    if (day !== undefined && day >= today) return;
    try {
      await rmdir(dir);
    } catch {
      return; // not empty (or already gone): its parents are not empty either
    }
    dir = dirname(dir);
  }
}

async function* list(root: string, prefix: string): AsyncGenerator<ListedObject> {
  // Walk from the deepest folder the prefix names whole; filter the rest by name.
  const cut = prefix.lastIndexOf("/");
  const folder = cut === -1 ? "" : prefix.slice(0, cut);
  if (folder !== "") checkKey(folder);
  const start = folder === "" ? root : join(root, folder);
  for await (const entry of walk(start, folder === "" ? "" : `${folder}/`)) {
    if (entry.key.startsWith(prefix)) yield entry;
  }
}

async function* walk(dir: string, keyPrefix: string): AsyncGenerator<ListedObject> {
  let names: string[];
  try {
    names = (await readdir(dir)).sort();
  } catch (err) {
    if (isMissing(err) || (err as NodeJS.ErrnoException).code === "ENOTDIR") return;
    throw err;
  }
  for (const name of names) {
    const path = join(dir, name);
    const key = `${keyPrefix}${name}`;
    let info;
    try {
      info = await stat(path);
    } catch (err) {
      if (isMissing(err)) continue; // deleted while listed
      throw err;
    }
    if (info.isDirectory()) yield* walk(path, `${key}/`);
    else if (info.isFile()) yield { key, size: info.size };
  }
}
