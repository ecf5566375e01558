import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { Redis } from "ioredis";
import { describe, expect, it, onTestFinished } from "vitest";
import { REDIS_URL, imagesDirOf } from "../support/redis.js";
import { startTestApp } from "../support/start-test-app.js";
import { apiError, retrieveUntil, sdk } from "./response-helpers.js";
import { scriptChannel, testPng } from "./scripted-channel.js";

/** Every file under `dir`, with its size. */
async function filesUnder(dir: string): Promise<Array<{ path: string; size: number }>> {
  const found: Array<{ path: string; size: number }> = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    found.push({ path, size: (await stat(path)).size });
  }
  return found;
}

/**
 * What a response costs the task store on Redis: its record's bytes, and the
 * members (plus an 8-byte score each) that name it in the indexes.
 */
async function storeCost(redis: Redis, prefix: string, id: string): Promise<number> {
  let bytes = await redis.strlen(`${prefix}::task:${id}`);
  for (const key of await redis.keys(`${prefix}::*`)) {
    if ((await redis.type(key)) !== "zset") continue;
    for (const member of await redis.zrange(key, 0, -1)) {
      if (member.includes(id)) bytes += Buffer.byteLength(member) + 8;
    }
  }
  return bytes;
}

describe("image output of background responses", () => {
  it("keeps images in the image store, never in the task store, and puts their base64 back on retrieve", async () => {
    const app = await startTestApp({ redis: true });
    onTestFinished(() => app.close());
    const prefix = app.config.store.prefix;
    const png = testPng(192);
    expect(png.byteLength).toBeGreaterThan(100_000);
    scriptChannel(app.upstream, { image: { png, partials: 2 } });
    const client = sdk(app);

    const { id } = await client.responses.create({
      model: "gpt-4o-mini",
      input: "draw",
      background: true,
      tools: [{ type: "image_generation", partial_images: 2 }],
    });
    const done = await retrieveUntil(client, id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    const [call, message] = done.output;
    expect(call).toMatchObject({ type: "image_generation_call", status: "completed" });
    expect((call as { result: string }).result).toBe(png.toString("base64"));

    // The result and both partial images are files of the image store, under the response's id.
    const files = await filesUnder(imagesDirOf(prefix));
    const own = files.filter((file) => file.path.includes(`/${id}/`));
    expect(own.map((file) => file.path.split("/").at(-1)).sort()).toEqual([
      "0.png",
      "partial-0.png",
      "partial-1.png",
    ]);
    const result = own.find((file) => file.path.endsWith("/0.png"))!;
    expect(await readFile(result.path)).toEqual(png);

    // The task store holds the request and the final response, no image bytes: at most 2 KB
    // beyond the text of its output.
    const redis = new Redis(REDIS_URL);
    onTestFinished(() => void redis.disconnect());
    const record = (await redis.get(`${prefix}::task:${id}`))!;
    expect(record).not.toContain(png.toString("base64").slice(0, 64));
    const text = (message as { content: Array<{ text: string }> }).content[0]!.text;
    const cost = await storeCost(redis, prefix, id);
    expect(cost).toBeLessThanOrEqual(Buffer.byteLength(text) + 2048);
    expect(cost).toBeGreaterThan(Buffer.byteLength(text));

    // Deleting the response deletes its images.
    await client.responses.delete(id);
    expect(await apiError(client.responses.retrieve(id))).toMatchObject({ status: 404 });
    const left = (await filesUnder(imagesDirOf(prefix))).filter((file) =>
      file.path.includes(`/${id}/`),
    );
    expect(left).toEqual([]);
  });
});
