import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { probeConfig } from "../../src/probe/probe-config.js";
import { openTaskBackend } from "../../src/tasks/open-task-backend.js";
import { deleteKeys, freePort, uniquePrefix } from "../support/redis.js";
import { testConfig, type TestAppOptions } from "../support/start-test-app.js";
import { useTempDir } from "../tasks/task-api.js";

/*
 * `check-config --probe`'s store and image store lines, on each kind: what
 * each backend's probe says when it answers and when it does not (the
 * channels' lines and the S3 store's are in test/channels/channel-checks).
 */

const logger = pino({ level: "silent" });

/** The store and image store lines of a probe of `options`'s configuration. */
async function probeLines(options: TestAppOptions) {
  const results = await probeConfig(testConfig("http://127.0.0.1:9/v1", options), logger);
  const [store, images] = results.slice(-2);
  return { store, images };
}

describe("check-config --probe on each kind of store", () => {
  it("memory: this process, nothing to reach", async () => {
    const { store, images } = await probeLines({ storeUrl: "memory://" });
    expect(store).toEqual({ ok: true, line: "store.url: memory:// (this process)" });
    expect(images).toEqual({ ok: true, line: "images.url: memory://: this process's memory" });
  });

  it("SQLite: a file not made yet, one that reads, one that is not SQLite", async () => {
    const dir = await useTempDir();
    const file = join(dir, "new", "tasks.db");
    const fresh = await probeLines({ storeUrl: `sqlite://${file}` });
    expect(fresh.store).toEqual({
      ok: true,
      line: `store.url: sqlite://${file} (not made yet; its folder can be written)`,
    });
    expect(fresh.images).toEqual({
      ok: true,
      line: `images.url: file://${join(dir, "new", "images")}: a file written and removed`,
    });
    const broken = join(dir, "broken.db");
    await writeFile(broken, "not a database, not even close ".repeat(40));
    expect((await probeLines({ storeUrl: `sqlite://${broken}` })).store).toEqual({
      ok: false,
      line: `store.url: ${broken} cannot be read as SQLite (SQLITE_NOTADB)`,
    });
    await mkdir(join(dir, "ok"));
    const made = join(dir, "ok", "tasks.db");
    // A store the service made (tables, WAL), then closed.
    const config = testConfig("http://127.0.0.1:9/v1", { storeUrl: `sqlite://${made}` });
    await (await openTaskBackend(config, logger)).close();
    expect((await probeLines({ storeUrl: `sqlite://${made}` })).store).toEqual({
      ok: true,
      line: `store.url: sqlite://${made}`,
    });
  });

  it("Redis: PING answered, naming the primary; one that does not answer, named without its password", async () => {
    const prefix = uniquePrefix("probe");
    onTestFinished(() => deleteKeys(prefix).then(() => undefined));
    const { store } = await probeLines({ redis: { prefix } });
    expect(store).toEqual({
      ok: true,
      line: "store.url: Redis (standalone) answers PING; primary 127.0.0.1:6379",
    });
    const port = await freePort();
    const away = `redis://:hunter2-secret@127.0.0.1:${port}`;
    const { store: refused } = await probeLines({
      config: { store: { url: away, connectTimeoutSec: 1 }, images: { url: "memory://" } },
    });
    expect(refused?.ok).toBe(false);
    expect(refused?.line).toMatch(
      new RegExp(`^store\\.url: cannot reach Redis at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${port}`),
    );
    expect(refused?.line).not.toContain("hunter2");
  });
});
