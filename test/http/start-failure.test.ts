import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import Database from "better-sqlite3";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { startServer } from "../../src/server.js";
import { testConfig } from "../support/start-test-app.js";
import { useTempDir } from "../tasks/task-api.js";

describe("a start-up that cannot listen", () => {
  it("rejects and lets go of what it opened: the SQLite store opens again at once", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => new Promise<void>((resolve) => taken.close(() => resolve())));
    const { port } = taken.address() as AddressInfo;
    const options = { storeUrl: `sqlite://${join(await useTempDir(), "sidecar.db")}` };
    const logger = pino({ level: "silent" });
    const onTakenPort = testConfig("http://127.0.0.1:9/v1", {
      ...options,
      config: { server: { port, host: "127.0.0.1" } },
    });

    // Named as the setting to change, not as the system call that failed.
    await expect(startServer({ config: onTakenPort, logger })).rejects.toThrow(
      `server.port (PORT): 127.0.0.1:${port} is in use by another process; stop it, or choose another port (EADDRINUSE)`,
    );

    // The same process, the same file: its lock was released with the rest.
    const running = await startServer({
      config: testConfig("http://127.0.0.1:9/v1", options),
      logger,
    });
    await running.close();
  });
});

describe("a start-up that fails once it listens", () => {
  it("when the task feature cannot start: rejects, closes the port, and lets go of the store", async () => {
    const file = join(await useTempDir(), "sidecar.db");
    const logger = pino({ level: "silent" });
    const free = createServer();
    await new Promise<void>((resolve) => free.listen(0, "127.0.0.1", resolve));
    const { port } = free.address() as AddressInfo;
    await new Promise<void>((resolve) => free.close(() => resolve()));
    const config = testConfig("http://127.0.0.1:9/v1", {
      storeUrl: `sqlite://${file}`,
      config: { server: { port, host: "127.0.0.1" } },
    });
    // An unfinished task whose record cannot be read: picking up what the last process left fails.
    const first = await startServer({ config, logger });
    await first.close();
    const db = new Database(file);
    db.prepare(
      "INSERT INTO tasks (id, owner, status, created, record) VALUES ('task_broken', 'o', 'queued', 0, '{not json')",
    ).run();
    db.close();

    await expect(startServer({ config, logger })).rejects.toThrow(/JSON/);

    // Nothing listens on the port any more, and the file's lock was released with the rest.
    const refused = await fetch(`http://127.0.0.1:${port}/healthz`).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(Error);
    const repaired = new Database(file);
    repaired.prepare("DELETE FROM tasks WHERE id = 'task_broken'").run();
    repaired.close();
    const running = await startServer({ config, logger });
    expect((await fetch(`${running.url}/healthz`)).status).toBe(200);
    await running.close();
  });
});
