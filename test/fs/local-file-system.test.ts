import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isLocalFileSystem } from "../../src/fs/local-file-system.js";

/*
 * The file image store makes a small image's calls synchronously only on a
 * local file system; anything else (a network mount, a type it does not know)
 * keeps them on the thread pool.
 */
describe.runIf(process.platform === "linux")("isLocalFileSystem", () => {
  it("is true for the machine's temporary directory, and for a folder not made yet below it", () => {
    expect(isLocalFileSystem(tmpdir())).toBe(true);
    expect(isLocalFileSystem(join(tmpdir(), "not-made-yet", "images"))).toBe(true);
  });

  it("is false for a file system it does not know as local (procfs, sysfs)", () => {
    expect(isLocalFileSystem("/proc/self")).toBe(false);
    expect(isLocalFileSystem("/sys/kernel")).toBe(false);
  });
});
