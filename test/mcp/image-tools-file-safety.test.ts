import { promises as fs } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { TINY_PNG } from "./fake-image-task-api.js";
import {
  PNG_MAGIC,
  api,
  call,
  outputDir,
  scratch,
  submit,
  text,
  useImageTools,
} from "./image-tools.js";

// The output directory: what the tools refuse to write through, over or from.
useImageTools();

describe("MCP image tools writing files (in memory, fake API)", () => {
  it("refuses to write through a symlink planted at the target path", async () => {
    api.plan({ pendingPolls: 0, outcome: { kind: "completed" } });
    const taskId = await submit();
    const victim = path.join(scratch, "victim.txt");
    await fs.writeFile(victim, "precious");
    await fs.mkdir(outputDir);
    await fs.symlink(victim, path.join(outputDir, `${taskId}-0.png`));
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/left untouched/);
    expect(await fs.readFile(victim, "utf8")).toBe("precious");
    expect((await fs.lstat(path.join(outputDir, `${taskId}-0.png`))).isSymbolicLink()).toBe(true);
    expect((await fs.readdir(outputDir)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });

  it("refuses a dangling symlink at the target path too", async () => {
    api.plan({ pendingPolls: 0, outcome: { kind: "completed" } });
    const taskId = await submit();
    const victim = path.join(scratch, "would-be-created.png");
    await fs.mkdir(outputDir);
    await fs.symlink(victim, path.join(outputDir, `${taskId}-0.png`));
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(result.isError).toBe(true);
    await expect(fs.access(victim)).rejects.toThrow();
  });

  it("never overwrites a file it did not write, but adopts identical bytes", async () => {
    api.plan({ pendingPolls: 0, outcome: { kind: "completed" } });
    const taskId = await submit();
    await fs.mkdir(outputDir);
    const target = path.join(outputDir, `${taskId}-0.png`);
    await fs.writeFile(target, "the user's own file");
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(result.isError).toBe(true);
    expect(text(result)).toContain("not written by this server");
    expect(await fs.readFile(target, "utf8")).toBe("the user's own file");

    // Identical bytes (e.g. a crash after linking, before the manifest) are returned, not rewritten.
    await fs.rm(target);
    await fs.writeFile(target, TINY_PNG);
    const ino = (await fs.stat(target)).ino;
    const adopted = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(adopted.isError, text(adopted)).toBeFalsy();
    expect((await fs.stat(target)).ino).toBe(ino);
  });

  it("does not rewrite a saved file that was changed afterwards", async () => {
    api.plan({ pendingPolls: 0, outcome: { kind: "completed" } });
    const taskId = await submit();
    const first = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    const file = (first.structuredContent as { files: Array<{ path: string }> }).files[0]!.path;
    await fs.writeFile(file, "edited by the user");
    const again = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(again.isError).toBe(true);
    expect(text(again)).toContain("changed after it was saved");
    expect(await fs.readFile(file, "utf8")).toBe("edited by the user");

    // A deleted file is saved again.
    await fs.rm(file);
    const third = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(third.isError, text(third)).toBeFalsy();
    expect((await fs.readFile(file)).subarray(0, 8)).toEqual(PNG_MAGIC);
  });

  it("refuses image URLs on another origin and writes nothing", async () => {
    api.plan({
      pendingPolls: 0,
      outcome: { kind: "completed", url: () => "http://169.254.169.254/latest/meta-data.png" },
    });
    const taskId = await submit();
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(result.isError).toBe(true);
    expect(text(result)).toContain("Refused to download http://169.254.169.254");
    expect(await fs.readdir(outputDir)).toEqual([]);
  });

  it("refuses content that is not an image", async () => {
    api.plan({
      pendingPolls: 0,
      outcome: { kind: "completed" },
      contentType: "image/png",
      body: Buffer.from("#!/bin/sh\nrm -rf /\n"),
    });
    const taskId = await submit();
    const result = await call("check_image_task", { task_id: taskId, wait_seconds: 0 });
    expect(result.isError).toBe(true);
    expect(text(result)).toContain("not a PNG, JPEG or WebP image");
    expect(await fs.readdir(outputDir)).toEqual([]);
  });
});
