import { copyFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, type TestAppOptions } from "../support/start-test-app.js";
import {
  PNG_MAGIC,
  getTask,
  submitOk,
  upstreamPrompts,
  useTempDir,
  waitForStatus,
  waitUntil,
} from "./task-api.js";

async function useUpstream(): Promise<FakeUpstream> {
  const upstream = await startFakeUpstream();
  onTestFinished(() => upstream.close());
  return upstream;
}

/** A SQLite store's file as it is now: the database and its write-ahead log (what a crash leaves). */
async function copyDatabase(from: string, to: string) {
  await copyFile(from, to);
  if (existsSync(`${from}-wal`)) await copyFile(`${from}-wal`, `${to}-wal`);
}

/** An app in front of a shared upstream, closed at the end of the test if the test did not. */
async function startOn(upstream: FakeUpstream, storeUrl: string, options: TestAppOptions = {}) {
  const app = await startTestApp({
    upstream,
    storeUrl,
    imageTasks: { maxConcurrent: 1 },
    ...options,
  });
  onTestFinished(() => app.close());
  return app;
}

describe("restart on the SQLite store", () => {
  it("runs the queued tasks and the interrupted one after a restart; none is stuck", async () => {
    const dir = await useTempDir();
    const storeUrl = `sqlite://${join(dir, "t.db")}`;
    const upstream = await useUpstream();

    const a = await startOn(upstream, storeUrl);
    const early = await submitOk(a, { prompt: "before", response_format: "url" });
    const earlyDone = await waitForStatus(a, early, ["completed", "failed"]);
    expect(earlyDone.body.status).toBe("completed");

    upstream.behave("images", { kind: "hang" });
    const arrived = upstream.nextRequest("images");
    const ids = [
      await submitOk(a, { prompt: "r0" }),
      await submitOk(a, { prompt: "r1" }),
      await submitOk(a, { prompt: "r2", n: 2 }),
    ];
    await arrived;
    const statuses = await Promise.all(ids.map(async (id) => (await getTask(a, id)).body.status));
    expect(statuses).toEqual(["in_progress", "queued", "queued"]);

    await a.close(); // SIGTERM-like: a short grace, then the running task is handed back
    await waitUntil(() => upstream.aborted >= 1, "the running call to be aborted");

    upstream.behave("images", { kind: "ok" });
    const b = await startOn(upstream, storeUrl);
    for (const id of ids) {
      const done = await waitForStatus(b, id, ["completed", "failed"]);
      expect(done.body.status, done.text).toBe("completed");
      expect(Buffer.from(done.body.data![0]!.b64_json!, "base64").subarray(0, 8)).toEqual(
        PNG_MAGIC,
      );
    }
    expect((await getTask(b, ids[2]!)).body.data).toHaveLength(2);
    expect(upstreamPrompts(upstream)).toEqual(["before", "r0", "r0", "r1", "r2"]);

    // What finished before the restart is still there, and its signed URL still works.
    const earlyAfter = await getTask(b, early);
    expect(earlyAfter.body.status).toBe("completed");
    const url = new URL(earlyDone.body.data![0]!.url!);
    const moved = new URL(`${url.pathname}${url.search}`, b.url);
    const image = await fetch(moved);
    expect(image.status).toBe(200);
    expect(Buffer.from(await image.arrayBuffer()).subarray(0, 8)).toEqual(PNG_MAGIC);
  });

  it("re-runs a task a crashed process left running, and fails it interrupted after maxAttempts", async () => {
    const dir = await useTempDir();
    const upstream = await useUpstream();
    upstream.behave("images", { kind: "hang" });
    const db = (name: string) => join(dir, name);

    // Process A crashes while running the task: its database as it was at that moment.
    const a = await startOn(upstream, `sqlite://${db("a.db")}`);
    let arrived = upstream.nextRequest("images");
    const id = await submitOk(a, { prompt: "crashes" });
    await arrived;
    expect((await getTask(a, id)).body.status).toBe("in_progress");
    await copyDatabase(db("a.db"), db("b.db"));
    await a.close();

    // Process B finds it left running: attempt 2 of 2. B crashes as well.
    arrived = upstream.nextRequest("images");
    const b = await startOn(upstream, `sqlite://${db("b.db")}`);
    expect((await arrived).body).toMatchObject({ prompt: "crashes" });
    expect((await getTask(b, id)).body.status).toBe("in_progress");
    await copyDatabase(db("b.db"), db("c.db"));
    await b.close();

    // Process C: the task was interrupted maxAttempts times; it fails instead of running again.
    const c = await startOn(upstream, `sqlite://${db("c.db")}`);
    const done = await waitForStatus(c, id, ["completed", "failed"]);
    expect(done.body.status).toBe("failed");
    expect(done.body.error?.code).toBe("interrupted");
    expect(done.body.error?.message).toEqual(expect.any(String));
    expect(done.headers.get("retry-after")).toBeNull();
    expect(upstreamPrompts(upstream)).toEqual(["crashes", "crashes"]);

    // C still works.
    upstream.behave("images", { kind: "ok" });
    const next = await submitOk(c, { prompt: "after" });
    expect((await waitForStatus(c, next, ["completed", "failed"])).body.status).toBe("completed");
  });

  it("lets a running task finish within the shutdown grace, and keeps its result", async () => {
    const dir = await useTempDir();
    const storeUrl = `sqlite://${join(dir, "t.db")}`;
    const upstream = await useUpstream();
    upstream.behave("images", { kind: "ok", delayMs: 600 });

    const a = await startOn(upstream, storeUrl);
    const arrived = upstream.nextRequest("images");
    const id = await submitOk(a, { prompt: "finishes during shutdown" });
    await arrived;
    await a.server.close(20_000);
    expect(upstream.aborted).toBe(0);

    const b = await startOn(upstream, storeUrl);
    const done = await getTask(b, id);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.data).toHaveLength(1);
    expect(upstreamPrompts(upstream)).toEqual(["finishes during shutdown"]);
  });
});

describe("shutdown on the memory store", () => {
  it("ends with running and queued tasks: close resolves and the upstream call is aborted", async () => {
    const upstream = await useUpstream();
    upstream.behave("images", { kind: "hang" });
    const app = await startOn(upstream, "memory://");
    const arrived = upstream.nextRequest("images");
    await submitOk(app, { prompt: "running" });
    await submitOk(app, { prompt: "queued" });
    await arrived;

    await app.server.close(100);

    await waitUntil(() => upstream.aborted >= 1, "the running call to be aborted");
    expect(upstream.inFlight).toBe(0);
    expect(upstreamPrompts(upstream)).toEqual(["running"]);
    await expect(fetch(`${app.url}/healthz`)).rejects.toThrow();
  });
});
