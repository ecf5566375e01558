import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/config-schema.js";
import { parseConfig } from "../../src/config/load-config.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { FORWARD_SECRET_META_KEY } from "../../src/tasks/legacy/legacy-forward-secret.js";
import { openTaskBackend } from "../../src/tasks/open-task-backend.js";
import { startFakeGateway, type FakeGateway } from "../support/fake-gateway.js";
import { REDIS_URL, deleteKeys, imagesDirOf, uniquePrefix } from "../support/redis.js";
import { spawnServe, writeConfig } from "../support/serve-process.js";
import { getTask, submitOk, waitForStatus, type Target } from "../tasks/task-api.js";

const ALICE = "sk-newapi-alice-secret-0123456789abcdef";
/** What an earlier version generated and kept in the task store. */
const KEPT = "an-earlier-versions-forward-secret-0123456789";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "forward-secret-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function gateway(): Promise<FakeGateway> {
  const gw = await startFakeGateway({ [ALICE]: ["gpt-image-1"] });
  cleanups.push(() => gw.close());
  return gw;
}

function forwardConfig(gw: FakeGateway, store: ConfigInput["store"], secret?: string) {
  return parseConfig({
    server: { port: 0, host: "127.0.0.1", shutdownGraceSec: 1 },
    store,
    // Replicas on one prefix share an image directory, deleted with the prefix's keys.
    ...(store?.prefix ? { images: { url: `file://${imagesDirOf(store.prefix)}` } } : {}),
    auth: { forward: { channel: "newapi", ...(secret ? { secret } : {}) } },
    groups: {},
    channels: [{ name: "newapi", baseUrl: gw.baseUrl, models: ["*"] }],
    imageTasks: { maxConcurrent: 1, pollIntervalSec: 1 },
    logging: { level: "silent" },
  });
}

async function serveForward(
  gw: FakeGateway,
  store: ConfigInput["store"],
  secret?: string,
): Promise<RunningServer & Target> {
  const server = await startServer({
    config: forwardConfig(gw, store, secret),
    logger: pino({ level: "silent" }),
    defaultMetrics: false,
  });
  cleanups.push(() => server.close(200));
  return Object.assign(server, { key: ALICE });
}

/**
 * Opens the task store as the service would, for what a test must set or read in it: the
 * store, and its meta as an earlier version kept it (the upgrade step's view).
 */
async function withStore<T>(
  gw: FakeGateway,
  store: ConfigInput["store"],
  use: (opened: {
    getOrSetMeta(key: string, create: () => string): Promise<string>;
    getMeta(key: string): Promise<string | undefined>;
  }) => Promise<T>,
): Promise<T> {
  const backend = await openTaskBackend(
    forwardConfig(gw, store, "x".repeat(32)),
    pino({ level: "silent" }),
  );
  try {
    return await use({
      getOrSetMeta: (key, create) => backend.store.getOrSetMeta(key, create),
      getMeta: (key) => backend.legacy!.getMeta(key),
    });
  } finally {
    await backend.close();
  }
}

describe("forward mode's secret is never kept beside the keys it seals", () => {
  it("refuses to start on Redis without auth.forward.secret: exit 2, one line saying why and how", async () => {
    const dir = await tempDir();
    const gw = await gateway();
    const file = await writeConfig(dir, "redis-forward", {
      server: { port: 0, host: "127.0.0.1" },
      store: { url: REDIS_URL, prefix: uniquePrefix("fwd-refused") },
      auth: { forward: { channel: "newapi" } },
      groups: {},
      channels: [{ name: "newapi", baseUrl: gw.baseUrl, models: ["*"] }],
    });
    const started = spawnServe(file, dir);
    expect(await started.exited).toBe(2);
    const lines = started.stderr().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^auth\.forward\.secret: required with a redis:\/\/ store/);
    expect(lines[0]).toContain("openssl rand -base64 48");
  });

  it("on SQLite, generates it into its own 0600 file beside the database, not into the database, and keeps it across restarts", async () => {
    const gw = await gateway();
    const db = join(await tempDir(), "tasks.db");
    const store = { url: `sqlite://${db}` };
    const first = await serveForward(gw, store);
    const id = await submitOk(first, { prompt: "owned across restarts" });
    await waitForStatus(first, id, ["completed"]);
    await first.close(200);

    const file = `${db}.forward-secret`;
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const secret = (await readFile(file, "utf8")).trim();
    expect(secret.length).toBeGreaterThanOrEqual(32);
    expect((await readFile(db)).includes(secret)).toBe(false);
    expect(await withStore(gw, store, (opened) => opened.getMeta(FORWARD_SECRET_META_KEY))).toBe(
      undefined,
    );

    // The same secret after a restart: the task still belongs to the key that made it.
    const second = await serveForward(gw, store);
    expect((await getTask(second, id)).status).toBe(200);
    expect((await readFile(file, "utf8")).trim()).toBe(secret);
  });

  it("moves a secret an earlier version kept in the SQLite store to the file, so a task in flight still runs with its key", async () => {
    const gw = await gateway();
    const db = join(await tempDir(), "tasks.db");
    const store = { url: `sqlite://${db}` };
    // A task sealed with that secret, waiting when the process stopped.
    const before = await serveForward(gw, store, KEPT);
    gw.upstream.behave("images", { kind: "hang" });
    const id = await submitOk(before, { prompt: "sealed before the upgrade" });
    await waitForStatus(before, id, ["in_progress"]);
    await before.close(200);
    // Where the earlier version kept it.
    await withStore(gw, store, (opened) =>
      opened.getOrSetMeta(FORWARD_SECRET_META_KEY, () => KEPT),
    );

    gw.upstream.reset();
    const after = await serveForward(gw, store);
    const done = await waitForStatus(after, id, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    const bearers = gw.upstream.requests
      .filter((request) => request.path === "/v1/images/generations")
      .map((request) => request.headers.authorization);
    expect(bearers).toEqual([`Bearer ${ALICE}`]);
    await after.close(200);

    expect((await readFile(`${db}.forward-secret`, "utf8")).trim()).toBe(KEPT);
    expect(await withStore(gw, store, (opened) => opened.getMeta(FORWARD_SECRET_META_KEY))).toBe(
      undefined,
    );
    // Overwritten in the database file, not only unlisted.
    expect((await readFile(db)).includes(KEPT)).toBe(false);
  });

  it("on Redis, deletes a copy an earlier version kept there once auth.forward.secret is set to it", async () => {
    const gw = await gateway();
    const prefix = uniquePrefix("fwd-kept");
    cleanups.push(() => deleteKeys(prefix));
    const store = { url: REDIS_URL, prefix };
    await withStore(gw, store, (opened) =>
      opened.getOrSetMeta(FORWARD_SECRET_META_KEY, () => KEPT),
    );
    const server = await serveForward(gw, store, KEPT);
    await waitForStatus(server, await submitOk(server, { prompt: "after" }), ["completed"]);
    expect(await withStore(gw, store, (opened) => opened.getMeta(FORWARD_SECRET_META_KEY))).toBe(
      undefined,
    );
  });
});
