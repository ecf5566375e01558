import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
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

    await expect(startServer({ config: onTakenPort, logger })).rejects.toThrow(/EADDRINUSE/);

    // The same process, the same file: its lock was released with the rest.
    const running = await startServer({
      config: testConfig("http://127.0.0.1:9/v1", options),
      logger,
    });
    await running.close();
  });
});
