import { copyFile, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import {
  PNG_MAGIC,
  call,
  getTask,
  useApp,
  useTempDir,
  waitForStatus,
  type ApiResponse,
} from "../task-api.js";

// A SQLite store written by the release before the SQL tables (one Keyv table; see
// test/fixtures/README.md) opens, is moved into the tables once, and keeps working.

const FIXTURE = resolve(import.meta.dirname, "../../fixtures/legacy-keyv.db");
const id = (name: string) => `task_fixture${name.padEnd(17, "0")}`;
const PNGS = [
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
];

/** Webhooks on (the fixture's receiver never answers): deliveries stay pending. */
const WEBHOOKS = {
  webhooks: { secret: `whsec_${Buffer.alloc(32, 7).toString("base64")}`, retryScheduleSec: [600] },
};

async function fixtureCopy(): Promise<string> {
  const file = join(await useTempDir(), "sidecar.db");
  await copyFile(FIXTURE, file);
  return file;
}

/** What the file holds, read with a connection of its own (the service is stopped). */
function inspect<T>(file: string, read: (db: Database.Database) => T): T {
  const db = new Database(file, { readonly: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

const tableNames = (db: Database.Database) =>
  (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[])
    .filter((name) => !name.startsWith("sqlite_"))
    .sort();

describe("a SQLite store written by the Keyv-table release", () => {
  it("opens: finished tasks poll with their images, unfinished ones run, webhooks and keys hold", async () => {
    const file = await fixtureCopy();
    const app = await useApp({ storeUrl: `sqlite://${file}`, config: WEBHOOKS });

    // Finished before the upgrade: as they were, images included.
    const b64 = await getTask(app, id("DoneB64"));
    expect(b64.status, b64.text).toBe(200);
    expect(b64.body).toMatchObject({ status: "completed", usage: { total_tokens: 10 } });
    expect(b64.body.data?.map((item) => item.b64_json)).toEqual(PNGS);

    const url = await getTask(app, id("DoneUrl"));
    expect(url.body.status).toBe("completed");
    expect(url.body.data?.[0]?.revised_prompt).toBe("a red dot");
    const image = await fetch(url.body.data![0]!.url!);
    expect(image.status).toBe(200);
    expect(image.headers.get("content-type")).toBe("image/png");
    expect(Buffer.from(await image.arrayBuffer()).toString("base64")).toBe(PNGS[1]);

    const failed = await getTask(app, id("Failed"));
    expect(failed.body).toMatchObject({
      status: "failed",
      error: { code: "upstream_error", message: "The channel failed." },
    });

    // Left queued, in progress, or queued with its input images: each runs and completes.
    const ran: ApiResponse[] = [];
    for (const name of ["Queued", "Running", "Edit"]) {
      ran.push(await waitForStatus(app, id(name), ["completed", "failed"], 20_000));
    }
    for (const done of ran) {
      expect(done.body.status, done.text).toBe("completed");
      const bytes = Buffer.from(done.body.data![0]!.b64_json!, "base64");
      expect(bytes.subarray(0, 8)).toEqual(PNG_MAGIC);
    }
    const edit = app.upstream.requests.find((request) => request.path.endsWith("/images/edits"));
    expect(edit?.parts?.filter((part) => part.filename).map((part) => part.data)).toEqual(
      PNGS.map((png) => Buffer.from(png, "base64")),
    );

    // The idempotency key still names its task: the same key with another body is refused.
    const reused = await call(app, "POST", "/v1/images/tasks", {
      json: { model: "gpt-image-1", prompt: "another body" },
      headers: { "idempotency-key": "fixture-idem" },
    });
    expect(reused.status, reused.text).toBe(409);
    expect(reused.body).toMatchObject({ error: { code: "idempotency_key_conflict" } });

    // Listing shows every task, newest first.
    const list = await call(app, "GET", "/v1/images/tasks?limit=10");
    expect((list.body as unknown as { data: Array<{ id: string }> }).data.map((t) => t.id)).toEqual(
      ["Edit", "Failed", "DoneUrl", "DoneB64", "Running", "Queued"].map(id),
    );
    await app.close();

    inspect(file, (db) => {
      expect(tableNames(db)).not.toContain("keyv");
      expect(db.pragma("user_version", { simple: true })).toBe(1);
      // The URL signing secret moved with the rest (the URL above was signed with it).
      expect(
        db.prepare("SELECT value FROM meta WHERE key = 'url-signing-secret'").pluck().get(),
      ).toBe("fixture-url-signing-secret-0123456789abcdef");
      // The pending delivery is still pending, and the outbox entry was handed to the queue.
      expect(db.prepare("SELECT count(*) FROM webhook_outbox").pluck().get()).toBe(0);
      const pending = (db.prepare("SELECT pending FROM webhook_journal").pluck().all() as string[])
        .map((text) => JSON.parse(text) as { delivery: { taskId: string } })
        .map((entry) => entry.delivery.taskId)
        .sort();
      expect(pending).toEqual([id("DoneUrl"), id("Failed")].sort());
      // The images moved into the image store at start-up (the edit's inputs went when it
      // finished): the table the earlier releases kept them in is gone.
      expect(tableNames(db)).not.toContain("image_blobs");
    });

    // The old table's pages were zeroed as it went, not left in the file's free list.
    expect((await readFile(file)).includes("index:unfinished")).toBe(false);

    // Opened again: nothing to move any more, and everything is still there.
    const again = await useApp({ storeUrl: `sqlite://${file}` });
    expect((await getTask(again, id("DoneB64"))).body.data?.map((item) => item.b64_json)).toEqual(
      PNGS,
    );
    expect((await getTask(again, id("Edit"))).body.status).toBe("completed");
  });

  it("moves everything or nothing: a start-up that fails leaves the old table as it was", async () => {
    const file = await fixtureCopy();
    const before = inspect(file, (db) => db.prepare("SELECT key, value FROM keyv").all());
    // A table in the way of the new schema makes the migration fail halfway.
    const blocker = new Database(file);
    blocker.exec("CREATE TABLE owners (something_else TEXT)");
    blocker.close();

    await expect(useApp({ storeUrl: `sqlite://${file}` })).rejects.toThrow();
    inspect(file, (db) => {
      expect(tableNames(db)).toEqual(["keyv", "owners"]);
      expect(db.prepare("SELECT key, value FROM keyv").all()).toEqual(before);
      expect(db.pragma("user_version", { simple: true })).toBe(0);
    });

    const fixed = new Database(file);
    fixed.exec("DROP TABLE owners");
    fixed.close();
    const app = await useApp({ storeUrl: `sqlite://${file}` });
    expect((await getTask(app, id("Failed"))).body.status).toBe("failed");
  });
});
