import fs, { closeSync, constants, openSync, writeSync } from "node:fs";
import { promisify } from "node:util";
import { DIRECT_IO_ALIGNMENT, isPageAligned } from "./page-aligned-buffer.js";

/** Callback `write`, promisified: a FileHandle's promise API costs several times its CPU. */
const writeAt = promisify(fs.write);

/** `O_DIRECT` where the platform has it (Linux); 0 elsewhere, where nothing is written so. */
const O_DIRECT = (constants as { O_DIRECT?: number }).O_DIRECT ?? 0;

/**
 * Whether {@link writeFileDirect} may take `bytes`: a page-aligned buffer
 * (`page-aligned-buffer.ts`) on a platform with `O_DIRECT`.
 */
export function canWriteDirect(bytes: Uint8Array): boolean {
  return O_DIRECT !== 0 && bytes.length >= DIRECT_IO_ALIGNMENT && isPageAligned(bytes);
}

/**
 * Writes `bytes` (see {@link canWriteDirect}) as the new file `path`, the
 * whole blocks with `O_DIRECT`: from the buffer to the disk, without a copy
 * into the page cache. On a virtual machine that copy is most of a large
 * image's cost: each page-cache page the guest has not used lately is a
 * fault in the host (a 3 MB file: 5 to 9 ms of CPU, against about 0.4 ms
 * written directly). The last partial block, if any, is written through
 * the page cache (direct writes are whole blocks).
 *
 * The file is made with `mode` (created, or truncated). The copy to the disk
 * runs on the thread pool; opening and closing are synchronous calls (a
 * local file system's, as the caller makes sure).
 * @returns false when the file system refuses direct writes (tmpfs on older
 *   kernels, some FUSE and overlay mounts), and nothing was written
 */
export async function writeFileDirect(
  path: string,
  bytes: Uint8Array,
  mode: number,
): Promise<boolean> {
  let fd: number;
  try {
    fd = openSync(
      path,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | O_DIRECT,
      mode,
    );
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EINVAL") return false;
    throw err;
  }
  try {
    const whole = bytes.length - (bytes.length % DIRECT_IO_ALIGNMENT);
    let written = 0;
    // A short write ends on a block too (the device's), so the loop stays aligned; one that
    // does not is finished below through the page cache.
    while (written < whole) {
      const { bytesWritten } = await writeAt(fd, bytes, written, whole - written, written);
      written += bytesWritten;
      if (bytesWritten === 0 || bytesWritten % DIRECT_IO_ALIGNMENT !== 0) break;
    }
    if (written < bytes.length) writeRest(path, bytes, written);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** Writes `bytes` from `from` on through the page cache (a second descriptor, without O_DIRECT). */
function writeRest(path: string, bytes: Uint8Array, from: number): void {
  const fd = openSync(path, constants.O_WRONLY);
  try {
    let at = from;
    while (at < bytes.length) at += writeSync(fd, bytes, at, bytes.length - at, at);
  } finally {
    closeSync(fd);
  }
}
