import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isLocalFileSystem } from "../../src/fs/local-file-system.js";
import { allocPageAligned } from "../../src/fs/page-aligned-buffer.js";
import { createFileImageStore } from "../../src/images/file-image-store.js";
import { readAll } from "./read-all.js";

/*
 * On a local file system a task's large image is written past the page cache
 * (O_DIRECT). One that refuses that (tmpfs before Linux 6.6, some overlay
 * mounts) must still get every image whole, through the page cache. ramfs
 * refuses it on every kernel, and stands in for them here (the store finds it
 * local, as it finds tmpfs). ramfs needs a mount, so this runs where the tests
 * may mount (root on Linux).
 */

/** A ramfs mounted on a new directory, or undefined where mounting is not allowed. */
function mountRamfs(): string | undefined {
  if (process.platform !== "linux" || process.getuid?.() !== 0) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "ramfs-images-"));
  try {
    execFileSync("mount", ["-t", "ramfs", "ramfs", dir], { stdio: "ignore" });
    return dir;
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
}

const ramfs = mountRamfs();
afterAll(() => {
  if (!ramfs) return;
  execFileSync("umount", [ramfs], { stdio: "ignore" });
  rmSync(ramfs, { recursive: true, force: true });
});

/** `length` random bytes at the start of a page-aligned buffer, as a task decodes an image. */
function decodedImage(length: number): Buffer {
  const bytes = allocPageAligned(length + 100_000).subarray(0, length);
  randomBytes(length).copy(bytes);
  return bytes;
}

describe.runIf(ramfs)("the file image store on a file system that refuses direct writes", () => {
  it("finds it local, as tmpfs: a small image's calls may run on the event loop", () => {
    expect(isLocalFileSystem(join(ramfs!, "images"))).toBe(true);
  });

  it("keeps every image whole, owner-only, through the page cache", async () => {
    const store = createFileImageStore({
      dir: join(ramfs!, "images"),
      inline: true,
      direct: true,
    });
    try {
      // The first write is refused direct (EINVAL) and written cached; the later ones go cached.
      const images = [3 * 1024 * 1024 + 17, 2 * 1024 * 1024, 1024 * 1024 + 4095].map(decodedImage);
      for (const [index, bytes] of images.entries()) {
        await store.put(`2030-01-01/task_ramfs/${index}.png`, bytes, "image/png");
      }
      for (const [index, bytes] of images.entries()) {
        const found = await store.get(`2030-01-01/task_ramfs/${index}.png`);
        expect(found?.size).toBe(bytes.length);
        expect((await readAll(found!.body)).equals(bytes)).toBe(true);
      }
      const folder = join(ramfs!, "images", "2030-01-01", "task_ramfs");
      const files = (await readdir(folder)).sort();
      expect(files).toEqual(["0.png", "1.png", "2.png"]); // no temporary file left behind
      for (const file of files) expect((await stat(join(folder, file))).mode & 0o777).toBe(0o600);
    } finally {
      await store.close();
    }
  });
});
