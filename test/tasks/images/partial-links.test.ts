import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createImageUrlSigner } from "../../../src/tasks/images/image-url-signer.js";
import { createMemoryImageStore } from "../../../src/images/memory-image-store.js";
import { createTaskImages } from "../../../src/tasks/images/task-images.js";
import type { TaskRecord } from "../../../src/tasks/core/task-record.js";
import { flatPng } from "../scripted-image-stream.js";

const running: TaskRecord = {
  id: "task_BBBBBBBBBBBBBBBBBBBBBB",
  owner: "o",
  status: "in_progress",
  model: "gpt-image-1",
  request: {},
  responseFormat: "url",
  created: 1_800_000_000,
  started_at: 1_800_000_010,
  attempts: 2,
};

function taskImages(links: "service" | "public") {
  const signer = createImageUrlSigner("a secret of the test");
  const images = createTaskImages({
    imageStore: createMemoryImageStore(),
    signer,
    config: { links, publicBaseUrl: "https://cdn.example.com/images" },
    logger: pino({ level: "silent" }),
    now: () => 1_800_000_020_000,
    runLimitSec: 600 + 86_400,
  });
  return { images, signer };
}

describe("partial images in the image store", () => {
  it("are kept under the last day their task can expire on, as the run's own, and read back", async () => {
    const { images } = taskImages("service");
    const kept = await images.putPartial(running, 0, { bytes: flatPng(7), mime: "image/png" });
    const day = new Date((1_800_000_010 + 600 + 86_400) * 1000).toISOString().slice(0, 10);
    expect(kept).toEqual({
      mime: "image/png",
      bytes: flatPng(7).length,
      key: `${day}/${running.id}/partial-0.run2.png`,
    });
    const record = { ...running, partials: [kept] };
    const object = await images.openPartial(record, 0);
    const chunks: Buffer[] = [];
    for await (const chunk of object!.body) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(flatPng(7))).toBe(true);
    expect(await images.openPartial(record, 1)).toBeUndefined();
  });

  it("are linked as images.links says: the service's own signed URL, or public", async () => {
    const service = taskImages("service");
    const kept = await service.images.putPartial(running, 0, {
      bytes: flatPng(7),
      mime: "image/png",
    });
    const record = { ...running, partials: [kept] };
    const link = new URL(await service.images.partialLink(record, 0, "https://api.example.com"));
    expect(link.pathname).toBe(`/v1/images/files/${running.id}/partial-0.png`);
    // Valid as long as the task can be kept: its timeout and retention from its start.
    expect(link.searchParams.get("expires")).toBe(String(1_800_000_010 + 600 + 86_400));
    const { expires, signature } = Object.fromEntries(link.searchParams);
    expect(
      service.signer.verify(running.id, "partial-0.png", expires!, signature!, 1_800_000_030),
    ).toBe(true);

    const cdn = taskImages("public");
    expect(await cdn.images.partialLink(record, 0, "https://api.example.com")).toBe(
      `https://cdn.example.com/images/${kept.key}`,
    );
  });
});
