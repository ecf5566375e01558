import { cp, mkdir, mkdtemp, readdir, rm, symlink } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runToExit, writeConfig } from "../../support/serve-process.js";

/*
 * An installation whose SQLite driver cannot load (its native addon never
 * built, as after `npm ci --ignore-scripts`; a build for another Node fails
 * the same way), as an operator meets it: the bin, copied beside a
 * node_modules whose better-sqlite3 has its JavaScript and no addon, every
 * other package the checkout's own. `check-config --probe` and the start
 * both say the driver cannot load and what to run, also for a store file
 * not made yet (the probe reads no file then, but the start needs the driver).
 */

const ROOT = resolve(import.meta.dirname, "../../..");
const DRIVER = "store.url: the SQLite driver (better-sqlite3) cannot load";

let dir: string;
let app: string;
let gateway: Server;
let baseUrl: string;

/** A copy of the bin whose better-sqlite3 lacks its addon. */
async function installWithoutAddon(target: string): Promise<void> {
  await cp(join(ROOT, "dist"), join(target, "dist"), { recursive: true });
  await cp(join(ROOT, "config"), join(target, "config"), { recursive: true });
  await cp(join(ROOT, "package.json"), join(target, "package.json"));
  const modules = join(target, "node_modules");
  await mkdir(modules);
  for (const name of await readdir(join(ROOT, "node_modules"))) {
    if (name === "better-sqlite3" || name.startsWith(".")) continue;
    await symlink(join(ROOT, "node_modules", name), join(modules, name));
  }
  const driver = join(ROOT, "node_modules", "better-sqlite3");
  await cp(join(driver, "package.json"), join(modules, "better-sqlite3", "package.json"));
  // Its JavaScript only: no build/ and no lib/binding/ (where CI keeps one addon per Node ABI).
  await cp(join(driver, "lib"), join(modules, "better-sqlite3", "lib"), {
    recursive: true,
    filter: (source) => !source.includes(join("lib", "binding")),
  });
}

function run(args: string[]) {
  return runToExit(args, {
    cwd: dir,
    script: join(app, "dist", "cli.js"),
    env: { LOG_LEVEL: "silent" },
  });
}

/** A configuration whose only problem can be the store: its channel answers the probe. */
function configFor(storeFile: string) {
  return writeConfig(dir, `store-${Math.random().toString(36).slice(2)}`, {
    server: { port: 0, host: "127.0.0.1" },
    store: { url: `sqlite://${storeFile}` },
    auth: { keys: [{ key: "sk-user-sqlite-driver", group: "default" }] },
    groups: { default: { models: ["*"] } },
    channels: [{ name: "gw", baseUrl, apiKey: "sk-upstream-sqlite-driver", models: ["*"] }],
    images: { url: "memory://" },
  });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sqlite-driver-missing-"));
  app = join(dir, "app");
  await installWithoutAddon(app);
  gateway = createServer((req, res) => {
    req.resume();
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ object: "list", data: [{ id: "gpt-image-1", object: "model" }] }));
  });
  await new Promise<void>((done) => gateway.listen(0, "127.0.0.1", done));
  baseUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  await new Promise((done) => gateway?.close(done));
  await rm(dir, { recursive: true, force: true });
});

describe("a SQLite driver that cannot load", () => {
  it("fails check-config --probe for a store file not made yet, naming the driver", async () => {
    const file = await configFor(join(dir, "data", "tasks.db"));
    const probe = await run(["check-config", "--probe", "--config", file]);
    expect(probe.code, probe.stdout + probe.stderr).toBe(1);
    const lines = probe.stdout.split("\n").filter((line) => /^(ok|failed) /.test(line));
    expect(lines[0]).toBe('ok      channels[0] "gw": GET /models answered 200 with a model list');
    expect(lines[1]).toMatch(
      /^failed {2}store\.url: the SQLite driver \(better-sqlite3\) cannot load: its native addon did not load \(Could not locate the bindings file\. Tried:\)\. Run `npm rebuild better-sqlite3`/,
    );
  });

  it("stops the start with the same words, exit code 1", async () => {
    const file = await configFor(join(dir, "data", "tasks.db"));
    const start = await run(["serve", "--config", file]);
    expect(start.code).toBe(1);
    expect(start.stderr).toContain(DRIVER);
    expect(start.stderr).toContain("npm rebuild better-sqlite3");
    expect(start.stderr).not.toContain("    at ");
  });
});
