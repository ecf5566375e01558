import { leaseSec } from "../support/time-factor.js";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { createClient } from "@keyv/redis";
import { Writable } from "node:stream";
import { pino, type Logger } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/config-schema.js";
import { parseConfig } from "../../src/config/load-config.js";
import { createLogger } from "../../src/logging/create-logger.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { startFakeGateway, type FakeGateway } from "../support/fake-gateway.js";
import { REDIS_URL, deleteKeys, imagesDirOf, uniquePrefix } from "../support/redis.js";
import { UPSTREAM_KEY } from "../support/start-test-app.js";
import {
  expectError,
  getTask,
  submit,
  submitOk,
  useTempDir,
  waitForStatus,
  waitUntil,
  type Target,
} from "./task-api.js";

/** Keys the fake new-api knows. */
const ALICE = "sk-newapi-alice-tasks-0123456789abcdef";
const BOB = "sk-newapi-bob-tasks-0123456789abcdef";
const GATEWAY_KEYS = { [ALICE]: ["gpt-image-1", "gpt-4o-mini"], [BOB]: ["gpt-4o-mini"] };

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function gateway(): Promise<FakeGateway> {
  const gw = await startFakeGateway(GATEWAY_KEYS);
  cleanups.push(() => gw.close());
  return gw;
}

interface Replica extends Target {
  server: RunningServer;
}

/**
 * The real service in front of `gw` in forward mode. Without `auth.forward.secret` (allowed
 * on the embedded stores) the sealing secret is generated once and kept beside the store, so
 * a restart must find it there to open a queued task's key; replicas on Redis share theirs.
 */
async function replica(
  gw: FakeGateway,
  store: ConfigInput["store"],
  logger: Logger = pino({ level: "silent" }),
): Promise<Replica> {
  const input: ConfigInput = {
    server: { port: 0, host: "127.0.0.1", shutdownGraceSec: 1 },
    store,
    // Replicas on one prefix share an image directory, deleted with the prefix's keys.
    ...(store?.prefix ? { images: { url: `file://${imagesDirOf(store.prefix)}` } } : {}),
    auth: {
      forward: {
        channel: "newapi",
        ...(store?.url?.startsWith("redis")
          ? { secret: "forward-tasks-secret-0123456789abcdef" }
          : {}),
      },
    },
    groups: {},
    // The gateway channel has a key of its own: a forward task must never fall back to it.
    channels: [{ name: "newapi", baseUrl: gw.baseUrl, apiKey: UPSTREAM_KEY, models: ["*"] }],
    imageTasks: { maxConcurrent: 1, pollIntervalSec: 1, leaseSec: leaseSec(2) },
    logging: { level: "silent" },
  };
  const server = await startServer({
    config: parseConfig(input),
    logger,
    defaultMetrics: false,
  });
  let closed = false;
  const close = () => (closed ? Promise.resolve() : ((closed = true), server.close(500)));
  cleanups.push(close);
  return { server, url: server.url, key: ALICE };
}

/** The bearers the gateway saw on image generations, in order. */
function imageBearers(gw: FakeGateway): Array<string | undefined> {
  return gw.upstream.requests
    .filter((request) => request.path === "/v1/images/generations")
    .map((request) => request.headers.authorization);
}

describe("forward mode: image tasks run with the submitter's key", () => {
  it("runs the task at the gateway with the client's own key, gives it to no other key, and logs no key", async () => {
    const gw = await gateway();
    let logs = "";
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs += chunk.toString("utf8");
        done();
      },
    });
    const app = await replica(gw, { url: "memory://" }, createLogger("trace", sink));
    const id = await submitOk(app, { prompt: "a forward lighthouse" });
    const done = await waitForStatus(app, id, ["completed"]);
    expect(done.body.data).toHaveLength(1);
    expect(imageBearers(gw)).toEqual([`Bearer ${ALICE}`]);
    // Another gateway key gets the same 404 as for a task that does not exist.
    expectError(await getTask(app, id, BOB), 404, "task_not_found");
    // A failing run logs too: its error must not carry the key either.
    gw.upstream.behave("images", { kind: "status", status: 500 });
    await waitForStatus(app, await submitOk(app, { prompt: "fails" }), ["failed"]);
    expect(logs).toContain("forward key accepted"); // the logger was really writing
    expect(logs).not.toContain(ALICE);
  });

  it("refuses a model outside the key's gateway list before anything is queued", async () => {
    const gw = await gateway();
    const app = await replica(gw, { url: "memory://" });
    expectError(await submit(app, { prompt: "x" }, { key: BOB }), 404, "model_not_found");
    expect(imageBearers(gw)).toEqual([]);
  });

  it("keeps the key only sealed while the task waits, runs it after a restart on SQLite, and deletes it when the task ends", async () => {
    const gw = await gateway();
    const file = join(await useTempDir(), "forward.db");
    const store = { url: `sqlite://${file}` };
    const first = await replica(gw, store);
    gw.upstream.behave("images", { kind: "hang" });
    const id = await submitOk(first, { prompt: "survives a restart" });
    await waitForStatus(first, id, ["in_progress"]);
    // The service stops with the task running: it is handed back, key and all.
    await first.server.close(200);
    const waiting = sqliteDump(file);
    expect(waiting).toContain(id);
    expect(waiting).toContain("sealedCredential");
    expect(waiting).not.toContain(ALICE);

    gw.upstream.reset();
    const second = await replica(gw, store);
    await waitForStatus(second, id, ["completed"]);
    expect(imageBearers(gw)).toEqual([`Bearer ${ALICE}`]);
    await second.server.close(200);
    const finished = sqliteDump(file);
    expect(finished).toContain(id);
    expect(finished).not.toContain("sealedCredential");
    expect(finished).not.toContain(ALICE);
  });

  it("runs a task on another replica on Redis with the key sealed there, and leaves no trace of it", async () => {
    const gw = await gateway();
    const prefix = uniquePrefix("fwd");
    cleanups.push(() => deleteKeys(prefix));
    const store = { url: REDIS_URL, prefix };
    const first = await replica(gw, store);
    gw.upstream.behave("images", { kind: "hang" });
    const id = await submitOk(first, { prompt: "moves to another replica" });
    await waitForStatus(first, id, ["in_progress"]);
    const waiting = await redisDump(prefix);
    expect(waiting).toContain("sealedCredential");
    expect(waiting).not.toContain(ALICE);

    // Only now a second replica: the task can only end there, after the first hands it back.
    const second = await replica(gw, store);
    gw.upstream.reset();
    await first.server.close(200);
    await waitForStatus(second, id, ["completed"], 20_000);
    expect(imageBearers(gw)).toEqual([`Bearer ${ALICE}`]);
    await waitUntil(
      async () => !(await redisDump(prefix)).includes("sealedCredential"),
      "the sealed key to leave Redis",
    );
    expect(await redisDump(prefix)).not.toContain(ALICE);
  });
});

/** Every value in the SQLite file, as text (what an attacker with the file would read). */
function sqliteDump(file: string): string {
  return execFileSync("python3", [
    "-c",
    "import sqlite3,sys\n" +
      "db=sqlite3.connect(sys.argv[1])\n" +
      "for (t,) in db.execute(\"select name from sqlite_master where type='table'\"):\n" +
      "  for row in db.execute(f'select * from \"{t}\"'): print(row)",
    file,
  ]).toString("utf8");
}

/** Every key and value under `prefix` in Redis, whatever its type, as text. */
async function redisDump(prefix: string): Promise<string> {
  const client = createClient({ url: REDIS_URL });
  await client.connect();
  try {
    const out: string[] = [];
    for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) {
      for (const key of keys) {
        const type = await client.type(key);
        const value =
          type === "string"
            ? await client.get(key)
            : type === "hash"
              ? await client.hGetAll(key)
              : type === "zset"
                ? await client.zRange(key, 0, -1)
                : type === "list"
                  ? await client.lRange(key, 0, -1)
                  : type === "set"
                    ? await client.sMembers(key)
                    : type === "stream"
                      ? await client.xRange(key, "-", "+")
                      : type;
        out.push(`${key} ${JSON.stringify(value)}`);
      }
    }
    return out.join("\n");
  } finally {
    await client.close();
  }
}
