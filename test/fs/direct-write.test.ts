import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canWriteDirect, writeFileDirect } from "../../src/fs/direct-write.js";
import { allocPageAligned, isPageAligned } from "../../src/fs/page-aligned-buffer.js";

/*
 * A large image is written from its page-aligned buffer past the page cache:
 * whole blocks directly, the last partial block through the cache. What is
 * read back must be the bytes, whatever the length.
 */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "direct-write-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** `length` random bytes at the start of a page-aligned buffer. */
function alignedBytes(length: number): Buffer {
  const bytes = allocPageAligned(length).subarray(0, length);
  randomBytes(length).copy(bytes);
  return bytes;
}

describe("page-aligned buffers", () => {
  it("are told apart from ordinary buffers and from views that do not start on a page", () => {
    const buffer = allocPageAligned(100_000);
    expect(buffer.length).toBeGreaterThanOrEqual(100_000);
    expect(isPageAligned(buffer)).toBe(true);
    expect(isPageAligned(buffer.subarray(4096))).toBe(true);
    expect(isPageAligned(buffer.subarray(1))).toBe(false);
    expect(isPageAligned(Buffer.alloc(100_000))).toBe(false);
  });
});

describe.runIf(process.platform === "linux")("writeFileDirect", () => {
  it.each([4096, 3 * 4096 + 1, 1024 * 1024, 3 * 1024 * 1024 + 17])(
    "writes %i bytes that read back the same, owner-only",
    async (length) => {
      const bytes = alignedBytes(length);
      expect(canWriteDirect(bytes)).toBe(true);
      const path = join(dir, `image-${length}.png`);
      expect(await writeFileDirect(path, bytes, 0o600)).toBe(true);
      expect((await readFile(path)).equals(bytes)).toBe(true);
      expect((await stat(path)).mode & 0o777).toBe(0o600);
    },
  );

  it("replaces a longer file whole", async () => {
    const path = join(dir, "replaced.png");
    expect(await writeFileDirect(path, alignedBytes(2 * 1024 * 1024), 0o600)).toBe(true);
    const shorter = alignedBytes(300_001);
    expect(await writeFileDirect(path, shorter, 0o600)).toBe(true);
    expect((await readFile(path)).equals(shorter)).toBe(true);
  });

  it("is not for buffers a direct write cannot take", () => {
    expect(canWriteDirect(randomBytes(1024 * 1024))).toBe(false);
    expect(canWriteDirect(allocPageAligned(1024 * 1024).subarray(16))).toBe(false);
    expect(canWriteDirect(allocPageAligned(1024).subarray(0, 1024))).toBe(false);
  });

  it("fails as the file system does for a folder that is not there", async () => {
    await expect(
      writeFileDirect(join(dir, "missing", "image.png"), alignedBytes(8192), 0o600),
    ).rejects.toMatchObject({ code: "ENOENT" });
  });
});
