import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { deleteKeys, startPrivateRedis, uniquePrefix } from "../support/redis.js";
import { serve, spawnServe, writeConfig } from "../support/serve-process.js";

/*
 * A credential in a URL's query (`redis://host/0?password=...`) is masked like
 * one in its user part, wherever the URL is written: the real CLI in its own
 * process, in front of a Redis of its own that requires a password
 * (`requirepass`), given in the store URL's query; neither the banner nor the
 * start-up error lines show it.
 */

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "query-credentials-"));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function configOn(storeUrl: string, dir: string, prefix: string) {
  return {
    server: { port: 0, host: "127.0.0.1", shutdownGraceSec: 1 },
    store: { url: storeUrl, prefix, connectTimeoutSec: 2 },
    images: { url: `file://${join(dir, "images")}` },
    auth: { keys: [{ key: "sk-query-credentials-test", group: "all" }] },
    groups: { all: { models: ["*"] } },
    channels: [{ name: "demo", type: "demo", models: ["gpt-4o-mini", "gpt-image-1"] }],
  };
}

describe("a password in the store URL's query", () => {
  it("is masked in the banner, and in no line the running service writes", async () => {
    const password = `pw-in-query-${randomBytes(8).toString("hex")}`;
    const redis = await startPrivateRedis({ password });
    onTestFinished(() => redis.close());
    const prefix = uniquePrefix("query-pw");
    onTestFinished(() => deleteKeys(prefix, redis.url).then(() => undefined));
    const { port } = new URL(redis.url);
    const dir = await tempDir();
    const file = await writeConfig(
      dir,
      "config",
      configOn(`redis://127.0.0.1:${port}/0?password=${password}`, dir, prefix),
    );
    // The banner for a person: its store line is what is checked.
    const served = await serve(file, dir, { LOG_LEVEL: "debug", LOG_FORMAT: "pretty" });
    // It did sign in with it: the service answers, on Redis.
    const models = await fetch(`${served.url}/v1/models`, {
      headers: { authorization: "Bearer sk-query-credentials-test" },
    });
    expect(models.status).toBe(200);
    expect(served.stdout()).toContain(`store: redis://127.0.0.1:${port}/0?password=***`);
    served.child.kill("SIGTERM");
    expect(await served.exited).toBe(0);
    expect(served.stdout() + served.stderr()).not.toContain(password);
  });

  it("is masked in the start-up error line when Redis refuses it", async () => {
    const redis = await startPrivateRedis({ password: `right-${randomBytes(8).toString("hex")}` });
    onTestFinished(() => redis.close());
    const wrong = `wrong-pw-${randomBytes(8).toString("hex")}`;
    const { port } = new URL(redis.url);
    const dir = await tempDir();
    for (const query of [`password=${wrong}`, `db=0&Access_Key=${wrong}`]) {
      const file = await writeConfig(
        dir,
        "config",
        configOn(`redis://127.0.0.1:${port}/0?${query}`, dir, uniquePrefix("query-pw")),
      );
      const started = spawnServe(file, dir, { LOG_LEVEL: "debug" });
      expect(await started.exited).not.toBe(0);
      const output = started.stdout() + started.stderr();
      expect(output).toContain(`store.url: cannot reach Redis at redis://127.0.0.1:${port}/0?`);
      expect(output).toContain(query.replace(wrong, "***"));
      expect(output).not.toContain(wrong);
    }
  });
});
