import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  openSqliteDatabase,
  sqliteDriverError,
  SqliteDriverError,
} from "../../../src/tasks/store/open-sqlite-database.js";

// Node's own message when an addon was built for another Node version (as Node 22 printed it
// for a better-sqlite3 that Node 20 built), with the code Node gives it.
const OTHER_NODE = Object.assign(
  new Error(
    "The module '/app/node_modules/better-sqlite3/build/Release/better_sqlite3.node'\n" +
      "was compiled against a different Node.js version using\n" +
      "NODE_MODULE_VERSION 115. This version of Node.js requires\n" +
      "NODE_MODULE_VERSION 127. Please try re-compiling or re-installing\n" +
      "the module (for instance, using `npm rebuild` or `npm install`).",
  ),
  { code: "ERR_DLOPEN_FAILED" },
);

describe("the SQLite driver's load failure, as a user reads it", () => {
  it("names the Node versions and what to run", () => {
    const error = sqliteDriverError(OTHER_NODE, "v22.23.5");
    expect(error).toBeInstanceOf(SqliteDriverError);
    expect(error?.message).toBe(
      "store.url: the SQLite driver (better-sqlite3) cannot load: it was built for another Node " +
        "version (NODE_MODULE_VERSION 115; Node v22.23.5 needs 127). Run `npm rebuild " +
        "better-sqlite3` (or `npm ci`) with this Node, or set store.url to another store " +
        "(redis://…, memory://).",
    );
    expect(error?.cause).toBe(OTHER_NODE);
  });

  it("says the same of an addon that was never built", () => {
    const missing = new Error(
      "Could not locate the bindings file. Tried:\n → /app/node_modules/better-sqlite3/build/better_sqlite3.node",
    );
    expect(sqliteDriverError(missing)?.message).toMatch(
      /^store\.url: the SQLite driver \(better-sqlite3\) cannot load: its native addon did not load \(Could not locate the bindings file\. Tried:\)\. Run `npm rebuild better-sqlite3`/,
    );
  });

  it("leaves SQLite's own errors alone", () => {
    const cantOpen = Object.assign(new Error("unable to open database file"), {
      code: "SQLITE_CANTOPEN",
    });
    expect(sqliteDriverError(cantOpen)).toBeUndefined();
    expect(sqliteDriverError(undefined)).toBeUndefined();
    expect(sqliteDriverError("a string")).toBeUndefined();
  });
});

describe("openSqliteDatabase", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "its-sqlite-driver-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("opens a file with the driver this Node loads", () => {
    const db = openSqliteDatabase(join(dir, "a.db"), {});
    expect(db.prepare("SELECT 1 + 1 AS two").get()).toEqual({ two: 2 });
    db.close();
  });

  it("passes a file's own problem on as SQLite's error", () => {
    let thrown: unknown;
    try {
      openSqliteDatabase(join(dir, "missing.db"), { fileMustExist: true });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect(thrown).not.toBeInstanceOf(SqliteDriverError);
    expect((thrown as Error).message).toMatch(/unable to open database file/);
  });
});
