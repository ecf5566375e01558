import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REDIS_URL, deleteKeys, uniquePrefix } from "../support/redis.js";
import { startS3Server } from "../support/s3-server.js";
import { serve, spawnServe, writeConfig } from "../support/serve-process.js";
import { TEST_KEYS } from "../support/start-test-app.js";

/* What start-up says about where images go, as an operator reads it in the logs. */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "images-startup-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const config = (prefix: string, images: Record<string, unknown> | undefined) => ({
  server: { port: 0, host: "127.0.0.1" },
  store: { url: REDIS_URL, prefix },
  auth: { keys: [{ key: TEST_KEYS.default, group: "default" }] },
  groups: { default: { models: ["gpt-image-*"] } },
  channels: [{ name: "x", baseUrl: "http://127.0.0.1:9/v1", models: ["gpt-image-1"] }],
  ...(images ? { images } : {}),
});

describe("start-up with Redis", () => {
  it("warns that a file:// image store must be shared by every replica, default or set", async () => {
    for (const images of [undefined, { url: `file://${join(dir, "shared")}` }]) {
      const prefix = uniquePrefix("startup");
      try {
        const file = await writeConfig(dir, prefix, config(prefix, images));
        const replica = await serve(file, dir, { LOG_LEVEL: "warn" });
        const warning = /every replica must mount the same directory/;
        const deadline = Date.now() + 5000;
        while (!warning.test(replica.stdout()) && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        expect(replica.stdout()).toMatch(warning);
        replica.child.kill("SIGKILL");
      } finally {
        await deleteKeys(prefix);
      }
    }
  });

  it("says nothing of the kind with an s3:// image store", async () => {
    const prefix = uniquePrefix("startup");
    try {
      // A real S3 (s3rver): start-up checks the image store before it listens.
      const s3 = await startS3Server();
      try {
        const file = await writeConfig(dir, prefix, config(prefix, s3.imagesConfig(prefix)));
        const replica = await serve(file, dir, { LOG_LEVEL: "warn" });
        // The warning may come after the banner: everything the process printed is read.
        replica.child.kill("SIGTERM");
        await replica.exited;
        expect(replica.stdout()).not.toMatch(/must mount|memory:\/\//);
      } finally {
        await s3.close();
      }
    } finally {
      await deleteKeys(prefix);
    }
  });
});

describe("start-up with images.links: public", () => {
  const publicLinks = { links: "public", publicBaseUrl: "https://cdn.example.com/images" };
  const embedded = (images: Record<string, unknown>) => ({
    ...config("unused", images),
    store: { url: "memory://" },
  });

  it("refuses memory:// images (exit 2, a line naming images.links): nothing else could serve the links", async () => {
    const file = await writeConfig(dir, "public-memory", embedded(publicLinks));
    const started = spawnServe(file, dir);
    expect(await started.exited).toBe(2);
    const lines = started.stderr().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^images\.links: public links need an image store/);
  });

  it("warns, with a directory, that such links never expire and need no key", async () => {
    const file = await writeConfig(
      dir,
      "public-directory",
      embedded({ url: `file://${join(dir, "public-images")}`, ...publicLinks }),
    );
    const started = await serve(file, dir, { LOG_LEVEL: "warn" });
    const warning = /images\.links is public: .*never expire and need no key/;
    const deadline = Date.now() + 5000;
    while (!warning.test(started.stdout()) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(started.stdout()).toMatch(warning);
    started.child.kill("SIGKILL");
  });
});
