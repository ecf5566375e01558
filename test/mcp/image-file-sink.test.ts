import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createImageFileSink, type ImageSource } from "../../src/mcp/sink/image-file-sink.js";
import { TINY_PNG } from "./fake-image-task-api.js";

const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46]);
const source = (bytes: Buffer, contentType?: string): ImageSource & { loads: number } => {
  const s = {
    loads: 0,
    async load() {
      s.loads++;
      return { bytes, contentType };
    },
  };
  return s;
};

describe("createImageFileSink", () => {
  let scratch: string;
  let outputDir: string;
  beforeEach(async () => {
    scratch = await fs.mkdtemp(path.join(os.tmpdir(), "mcp-sink-"));
    outputDir = path.join(scratch, "nested", "out");
  });
  afterEach(async () => {
    await fs.rm(scratch, { recursive: true, force: true });
  });

  it("names files after the sniffed type and creates the directory on first save", async () => {
    const sink = createImageFileSink({ outputDir });
    await expect(fs.access(outputDir)).rejects.toThrow();
    const saved = await sink.saveTaskImages("task_abc0000000000000000000", [
      source(TINY_PNG),
      source(JPEG),
    ]);
    expect(saved.map((f) => [path.basename(f.path), f.mime_type, f.bytes])).toEqual([
      ["task_abc0000000000000000000-0.png", "image/png", TINY_PNG.length],
      ["task_abc0000000000000000000-1.jpeg", "image/jpeg", JPEG.length],
    ]);
    expect(await sink.findSavedImages("task_abc0000000000000000000")).toEqual(saved);
  });

  it("lets two concurrent calls for one task end with the same single files", async () => {
    const sink = createImageFileSink({ outputDir });
    const [a, b] = await Promise.all([
      sink.saveTaskImages("task_race000000000000000000", [source(TINY_PNG)]),
      sink.saveTaskImages("task_race000000000000000000", [source(TINY_PNG)]),
    ]);
    expect(a).toEqual(b);
    expect((await fs.readdir(outputDir)).sort()).toEqual([
      ".task_race000000000000000000.manifest.json",
      "task_race000000000000000000-0.png",
    ]);
  });

  it("does not load anything for files its manifest vouches for", async () => {
    const sink = createImageFileSink({ outputDir });
    await sink.saveTaskImages("task_m000000000000000000000", [source(TINY_PNG)]);
    const again = source(TINY_PNG);
    await sink.saveTaskImages("task_m000000000000000000000", [again]);
    expect(again.loads).toBe(0);
  });

  it("refuses a Content-Type that contradicts the bytes", async () => {
    const sink = createImageFileSink({ outputDir });
    await expect(
      sink.saveTaskImages("task_ct00000000000000000000", [source(TINY_PNG, "image/webp")]),
    ).rejects.toThrow(/served as image\/webp but holds image\/png/);
  });

  it("refuses bad task ids before touching the disk", async () => {
    const sink = createImageFileSink({ outputDir });
    for (const id of ["../x", "task_a000000000000000000000/b", "task_.", "task_", "x"]) {
      await expect(sink.saveTaskImages(id, [source(TINY_PNG)])).rejects.toThrow(/Refused task id/);
    }
    await expect(fs.access(outputDir)).rejects.toThrow();
  });

  it("never trusts a forged manifest pointing outside the directory", async () => {
    const sink = createImageFileSink({ outputDir });
    await fs.mkdir(outputDir, { recursive: true });
    const manifest = {
      version: 1,
      task_id: "task_f000000000000000000000",
      files: [{ name: "../../outside.png", bytes: 1, sha256: "x", mime_type: "image/png" }],
    };
    await fs.writeFile(
      path.join(outputDir, ".task_f000000000000000000000.manifest.json"),
      JSON.stringify(manifest),
    );
    const saved = await sink.saveTaskImages("task_f000000000000000000000", [source(TINY_PNG)]);
    expect(saved[0]!.path).toBe(
      path.join(await fs.realpath(outputDir), "task_f000000000000000000000-0.png"),
    );
    await expect(fs.access(path.join(scratch, "outside.png"))).rejects.toThrow();
    // The foreign manifest is left as it was.
    expect(
      JSON.parse(
        await fs.readFile(
          path.join(outputDir, ".task_f000000000000000000000.manifest.json"),
          "utf8",
        ),
      ),
    ).toEqual(manifest);
  });

  it("explains an output directory that cannot be used", async () => {
    await fs.writeFile(path.join(scratch, "file"), "x");
    const sink = createImageFileSink({ outputDir: path.join(scratch, "file") });
    await expect(
      sink.saveTaskImages("task_d000000000000000000000", [source(TINY_PNG)]),
    ).rejects.toThrow(/Cannot use the output directory .*IMAGE_OUTPUT_DIR/);
  });
});
