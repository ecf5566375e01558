import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { crc32 as zlibCrc32 } from "node:zlib";
import { describe, expect, it, onTestFinished } from "vitest";
import { crc32, zipStore } from "../../console/src/zip.js";

const exec = promisify(execFile);

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "console-zip-"));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe("the console's ZIP writer (STORE)", () => {
  it("computes CRC-32 as zlib does", () => {
    const bytes = new TextEncoder().encode("The quick brown fox jumps over the lazy dog");
    expect(crc32(bytes)).toBe(0x414fa339);
    expect(crc32(new Uint8Array())).toBe(0);
    const random = new Uint8Array(70_000).map((_, i) => (i * 7919) % 251);
    expect(crc32(random)).toBe(zlibCrc32(random));
  });

  it("writes an archive that unzip tests, lists and extracts byte for byte", async () => {
    const dir = await tempDir();
    const files = [
      { name: "task_A-1.png", bytes: new Uint8Array(5000).map((_, i) => i % 256) },
      { name: "task_A-2.jpg", bytes: new Uint8Array([0xff, 0xd8, 0xff, 0xd9]) },
      { name: "empty.webp", bytes: new Uint8Array() },
      { name: "ünïcode 🦊.png", bytes: new TextEncoder().encode("fox") },
    ];
    const modified = new Date(2026, 0, 2, 13, 14, 16);
    const archive = join(dir, "images.zip");
    await writeFile(archive, zipStore(files.map((file) => ({ ...file, modified }))));

    const tested = await exec("unzip", ["-t", archive]);
    expect(tested.stdout).toMatch(/No errors detected/);
    const listed = await exec("zipinfo", ["-l", archive]);
    // Each one stored (not deflated), with its time.
    expect(listed.stdout.match(/ stor /g)).toHaveLength(4);
    expect(listed.stdout).toMatch(/26-Jan-02 13:14/);

    const out = join(dir, "out");
    await exec("unzip", ["-q", archive, "-d", out]);
    for (const file of files) {
      expect(new Uint8Array(await readFile(join(out, file.name))), file.name).toEqual(file.bytes);
    }
  });

  it("writes an empty archive as the 22 bytes of its end record", () => {
    expect([...zipStore([]).subarray(0, 4)]).toEqual([0x50, 0x4b, 0x05, 0x06]);
    expect(zipStore([])).toHaveLength(22);
  });
});
