import { chmod, lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { parseConfig } from "../../src/config/load-config.js";
import { startServer } from "../../src/server.js";
import { startFakeGateway } from "../support/fake-gateway.js";
import { submitOk, useTempDir, waitForStatus } from "../tasks/task-api.js";

/*
 * Files and directories the service creates are its user's alone whatever
 * the umask: the SQLite database keeps the secret that signs image links, the
 * secret file seals users' gateway keys, image files are users' images.
 */

const ALICE = "sk-newapi-alice-modes-0123456789abcdef";

/** Every file and directory under `root` (itself included), with its permission bits. */
async function modesUnder(root: string): Promise<Map<string, number>> {
  const modes = new Map<string, number>();
  const walk = async (path: string) => {
    const info = await lstat(path);
    modes.set(path, info.mode & 0o777);
    if (info.isDirectory()) {
      for (const name of await readdir(path)) await walk(join(path, name));
    }
  };
  await walk(root);
  return modes;
}

/** What each path should be: 0700 for a directory, 0600 for a file. */
async function expectOwnerOnly(modes: Map<string, number>): Promise<void> {
  for (const [path, mode] of modes) {
    const expected = (await lstat(path)).isDirectory() ? 0o700 : 0o600;
    expect(mode.toString(8), path).toBe(expected.toString(8));
  }
}

describe("file modes", () => {
  it("are 0600 (directories 0700) under umask 022; what an earlier release left is tightened at start-up, with a line", async () => {
    const previous = process.umask(0o022);
    onTestFinished(() => {
      process.umask(previous);
    });
    const data = join(await useTempDir(), "data");
    const db = join(data, "tasks.db");
    const gw = await startFakeGateway({ [ALICE]: ["gpt-image-1"] });
    onTestFinished(() => gw.close());
    // Forward mode on SQLite: its secret gets a file of its own beside the database.
    const config = parseConfig({
      server: { port: 0, host: "127.0.0.1", shutdownGraceSec: 1 },
      store: { url: `sqlite://${db}` },
      auth: { forward: { channel: "newapi" } },
      groups: {},
      channels: [{ name: "newapi", baseUrl: gw.baseUrl, models: ["*"] }],
      imageTasks: { pollIntervalSec: 1 },
      logging: { level: "silent" },
    });
    const first = await startServer({ config, logger: pino({ level: "silent" }) });
    const target = { url: first.url, key: ALICE };
    for (const format of ["url", "b64_json"]) {
      const id = await submitOk(target, { prompt: "private", response_format: format });
      await waitForStatus(target, id, ["completed"]);
    }
    // While it runs: the database with its WAL (no shared-memory file: the store locks the
    // database for its process alone), its owner note, the forward secret, the image folders
    // and files.
    const running = await modesUnder(data);
    for (const suffix of ["", "-wal", ".owner", ".forward-secret"]) {
      expect(running.has(`${db}${suffix}`), `${db}${suffix}`).toBe(true);
    }
    expect([...running.keys()].filter((path) => path.endsWith(".png")).length).toBe(2);
    await expectOwnerOnly(running);
    await first.close(500);

    // As an earlier release left them: readable by everyone.
    const left = await modesUnder(data);
    for (const path of left.keys()) {
      await chmod(path, (await lstat(path)).isDirectory() ? 0o755 : 0o644);
    }
    const lines: string[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => lines.push(line) });
    const second = await startServer({ config, logger });
    onTestFinished(() => second.close(500));
    const after = await modesUnder(data);
    // The database's folder, once it exists, is the operator's (it may be /var/lib or a
    // volume's root): left as it is; everything in it is tightened.
    expect(after.get(data)).toBe(0o755);
    after.delete(data);
    await expectOwnerOnly(after);
    const tightened = lines
      .map((line) => JSON.parse(line) as { msg: string; tightened?: number })
      .filter((line) => line.tightened !== undefined);
    expect(tightened.map((line) => line.msg.split(":")[0])).toEqual([
      "images.url",
      `store.url`,
      "auth.forward.secret",
    ]);
    for (const line of tightened) expect(line.msg).toContain("owner-only");
    await second.close(500);

    // The image folder is owner-only now: later starts do not walk it again (an image folder
    // can hold a day's images), so a file loosened by hand inside it stays as it is.
    const png = [...after.keys()].find((path) => path.endsWith(".png")) as string;
    await chmod(png, 0o644);
    const third = await startServer({ config, logger: pino({ level: "silent" }) });
    onTestFinished(() => third.close(500));
    expect((await lstat(png)).mode & 0o777).toBe(0o644);
  });
});
