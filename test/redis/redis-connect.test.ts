import { createServer, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { startServer } from "../../src/server.js";
import { testConfig } from "../support/start-test-app.js";
import { useTempDir } from "../tasks/task-api.js";
import { slow } from "../support/time-factor.js";

/** Stretched on a loaded machine, but always short of the 10 s default these tests tell apart. */
const UNDER_DEFAULT_MS = 9_000;

/** A port nothing listens on: taken from the system, then let go. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** Starts the service on the store `url` (1 s to connect): how it failed, and after how long. */
async function startOn(url: string): Promise<{ failure: Error | undefined; tookMs: number }> {
  const config = testConfig("http://127.0.0.1:9/v1", {
    config: {
      store: { url, connectTimeoutSec: 1 },
      images: { url: `file://${await useTempDir()}` },
    },
  });
  const started = Date.now();
  const failure = await startServer({ config, logger: pino({ level: "silent" }) }).then(
    () => undefined,
    (err: unknown) => err as Error,
  );
  return { failure, tookMs: Date.now() - started };
}

describe("start-up on a Redis that cannot be reached", () => {
  it("gives up after store.connectTimeoutSec, naming the URL without its password", async () => {
    const port = await closedPort();
    const { failure, tookMs } = await startOn(`redis://:hunter2-redis-password@127.0.0.1:${port}`);

    expect(failure?.message).toMatch(
      new RegExp(`^store\\.url: cannot reach Redis at redis://.*127\\.0\\.0\\.1:${port}`),
    );
    expect(failure?.message).not.toContain("hunter2-redis-password");
    // One second and the last back-off (at most 2 s), far from the 10 s default.
    expect(tookMs).toBeGreaterThanOrEqual(900);
    expect(tookMs).toBeLessThan(Math.min(slow(5_000), UNDER_DEFAULT_MS));
  });
});

/** A server that takes every connection and reads it, never answering (a hung Redis). */
async function silentPort(): Promise<number> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
    socket.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onTestFinished(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return (server.address() as AddressInfo).port;
}

describe("start-up on a Redis that accepts and never answers", () => {
  it.each([
    ["one server", (port: number) => `redis://:hunter2-redis-password@127.0.0.1:${port}`],
    [
      "Sentinel",
      (port: number) => `redis+sentinel://:hunter2-redis-password@127.0.0.1:${port}/mymaster`,
    ],
    ["Cluster", (port: number) => `redis+cluster://:hunter2-redis-password@127.0.0.1:${port}`],
  ])("%s: gives up after store.connectTimeoutSec, naming the URL", async (_name, urlOf) => {
    const port = await silentPort();
    const { failure, tookMs } = await startOn(urlOf(port));

    expect(failure?.message).toMatch(/^store\.url: cannot reach Redis/);
    expect(failure?.message).toContain(`127.0.0.1:${port}`);
    expect(failure?.message).not.toContain("hunter2-redis-password");
    // Not hung on the silent socket: about the 1 s deadline, far from the 10 s default.
    expect(tookMs).toBeLessThan(Math.min(slow(6_000), UNDER_DEFAULT_MS));
  });
});
