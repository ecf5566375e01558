import { randomBytes } from "node:crypto";
import fs, { constants } from "node:fs";
import { access, readdir, rename, rmdir, stat, unlink } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { promisify } from "node:util";
import { makeOwnerDir, OWNER_FILE_MODE } from "../fs/owner-only.js";
import { checkKey, contentTypeOfKey, dayOf, dayOfKey } from "./image-keys.js";
import type { ImageObject, ImageStore, ListedObject } from "./image-store.js";
import { fileStoreFailure } from "./image-store-error.js";

/** Options of {@link createFileImageStore}. */
export interface FileImageStoreOptions {
  /** The root directory (created when missing). */
  dir: string;
}

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
  return {
    backend: "file",
    put: (key, bytes) => failing("write", () => put(root, key, bytes)),
    get: (key) => failing("read", () => get(root, key)),
    delete: (keys) => failing("delete", () => deleteKeys(root, keys)),
    list: (prefix) => list(root, prefix),
    ping: () =>
      failing("access", async () => {
        // The root must exist and be writable: a read-only mount fails here (EROFS).
        await makeOwnerDir(root);
        await access(root, constants.W_OK);
      }),
    check: () => failing("write", () => check(root)),
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
async function check(root: string): Promise<void> {
  const key = `${dayOf(Math.floor(Date.now() / 1000))}/check-${randomBytes(6).toString("hex")}.txt`;
  await put(root, key, Buffer.from("image-task-sidecar store check\n"));
  await deleteKeys(root, [key]);
}

/** Times a write starts again when its folder vanished under it (another replica pruned it). */
const PUT_ATTEMPTS = 3;

async function put(root: string, key: string, bytes: Buffer): Promise<void> {
  const path = pathOf(root, key);
  for (let attempt = 1; ; attempt += 1) {
    try {
      await putOnce(path, bytes);
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

async function putOnce(path: string, bytes: Buffer): Promise<void> {
  await makeOwnerDir(dirname(path));
  // Hidden beside its target (same file system, so the rename is atomic); a crash leaves it
  // in the task's expiry-day folder, which the sweep deletes whole.
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  try {
    await writeWhole(temp, bytes, { mode: OWNER_FILE_MODE });
    await rename(temp, path);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
}

/**
 * An image this small is read whole into one buffer: fewer steps than a file
 * stream (an image poll's file reads were most of its cost), and no more
 * memory than a stream's own first chunk.
 */
const READ_WHOLE_BYTES = 256 * 1024;

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
    if (info.size <= READ_WHOLE_BYTES) {
      const bytes = Buffer.allocUnsafe(info.size);
      let read = 0;
      while (read < bytes.length) {
        const { bytesRead } = await readFd(fd, bytes, read, bytes.length - read, read);
        if (bytesRead === 0) break;
        read += bytesRead;
      }
      whole = bytes.subarray(0, read);
      body = Readable.from([whole], { objectMode: false });
    } else {
      // The stream closes the descriptor when it ends or is destroyed.
      body = fs.createReadStream("", { fd, highWaterMark: 256 * 1024 });
    }
    return {
      body,
      ...(whole && { bytes: whole }),
      size: info.size,
      contentType: contentTypeOfKey(key),
      // The inode changes with every write (a rename), so a rewrite never keeps its tag.
      etag: `"${info.ino.toString(16)}-${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}"`,
    };
  } finally {
    if (!body || !(body instanceof fs.ReadStream)) await closeFd(fd).catch(() => undefined);
  }
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
