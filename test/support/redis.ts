import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@keyv/redis";

/** The shared Redis every test uses (each under its own prefix). Never stopped or flushed. */
export const REDIS_URL = "redis://127.0.0.1:6379";

/** A key prefix no other test uses. */
export function uniquePrefix(label = "t"): string {
  return `test-${label}-${randomBytes(6).toString("hex")}`;
}

/**
 * The image store directory of the apps on `prefix` (`images.url` of a test
 * app on Redis): shared by its replicas like the prefix, deleted with it.
 */
export function imagesDirOf(prefix: string): string {
  return join(tmpdir(), "image-task-sidecar-test-images", prefix);
}

/**
 * Deletes every key under `prefix` on `url` (default: the shared Redis), and
 * the prefix's image directory ({@link imagesDirOf}); resolves how many keys.
 */
export async function deleteKeys(prefix: string, url = REDIS_URL): Promise<number> {
  await rm(imagesDirOf(prefix), { recursive: true, force: true });
  const client = createClient({ url });
  await client.connect();
  try {
    let deleted = 0;
    for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) {
      if (keys.length > 0) deleted += await client.del(keys);
    }
    return deleted;
  } finally {
    await client.close();
  }
}

/** Every key under `prefix`, sorted (what a test would see with `redis-cli --scan`). */
export async function listKeys(prefix: string, url = REDIS_URL): Promise<string[]> {
  const client = createClient({ url });
  await client.connect();
  try {
    const found: string[] = [];
    for await (const keys of client.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) {
      found.push(...keys);
    }
    return found.sort();
  } finally {
    await client.close();
  }
}

/**
 * A free TCP port on 127.0.0.1, for a process the test starts to listen on.
 * Taken below the kernel's ephemeral range where there is one: a port from
 * that range can be taken, between this check and the process's listen, as
 * the local port of any other test's outgoing connection (seen in CI:
 * `EADDRINUSE`).
 */
export async function freePort(): Promise<number> {
  const below = ephemeralStart();
  for (let attempt = 0; below !== undefined && attempt < 50; attempt += 1) {
    const port = below - 1 - Math.floor(Math.random() * Math.min(12_000, below - 10_000));
    if (await listensOn(port)) return port;
  }
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Whether 127.0.0.1:`port` can be listened on (it is then closed again). */
function listensOn(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** The first port of Linux's ephemeral range (`ip_local_port_range`); undefined elsewhere. */
function ephemeralStart(): number | undefined {
  try {
    const start = Number(
      readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0],
    );
    return Number.isInteger(start) && start > 11_000 ? start : undefined;
  } catch {
    return undefined;
  }
}

/** A Redis of the test's own, for outages: the shared one is never stopped. */
export interface PrivateRedis {
  url: string;
  /** Stops it as an operator would (`SHUTDOWN SAVE`: its data is kept for the restart). */
  stop(): Promise<void>;
  /** Starts it again on the same port and data. */
  start(): Promise<void>;
  /** Freezes it (SIGSTOP): connections stay open and get no answer, as in a paused container. */
  pause(): void;
  /** Lets a paused one go on (SIGCONT). */
  resume(): void;
  /** Stops it and deletes its data. */
  close(): Promise<void>;
}

/**
 * Starts `redis-server` on a free port, saving nothing on its own
 * (`--save "" --appendonly no`); `stop()` writes one snapshot so that a
 * restart finds the data, as a Redis with persistence would.
 */
export async function startPrivateRedis(
  options: { password?: string } = {},
): Promise<PrivateRedis> {
  // The free port may be taken by another test between finding it and binding it: try another.
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startPrivateRedisOnce(options);
    } catch (err) {
      if (attempt >= 3 || !String((err as Error).message).includes("exited")) throw err;
    }
  }
}

async function startPrivateRedisOnce(options: { password?: string }): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), "redis-"));
  const auth = options.password === undefined ? "" : `:${encodeURIComponent(options.password)}@`;
  const url = `redis://${auth}127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const start = async () => {
    const started = spawn(
      "redis-server",
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        dir,
        ...(options.password === undefined ? [] : ["--requirepass", options.password]),
      ],
      { stdio: "ignore" },
    );
    child = started;
    for (let i = 0; i < 200; i += 1) {
      const client = createClient({ url, socket: { reconnectStrategy: false } });
      client.on("error", () => undefined);
      try {
        await client.connect();
        await client.ping();
        await client.close();
        return;
      } catch {
        // A client whose connect failed may be closed already.
        if (client.isOpen) client.destroy();
        if (started.exitCode !== null) throw new Error(`redis-server exited ${started.exitCode}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    }
    throw new Error("redis-server did not start");
  };
  const stop = async () => {
    const running = child;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    const client = createClient({ url });
    client.on("error", () => undefined);
    await client.connect();
    await client.sendCommand(["SHUTDOWN", "SAVE"]).catch(() => undefined);
    client.destroy();
    await exited;
  };
  await start().catch(async (err: unknown) => {
    await rm(dir, { recursive: true, force: true });
    throw err;
  });
  return {
    url,
    start,
    stop,
    pause: () => child?.kill("SIGSTOP"),
    resume: () => child?.kill("SIGCONT"),
    async close() {
      if (child && child.exitCode === null) {
        child.kill("SIGCONT");
        const exited = new Promise((resolve) => child!.once("exit", resolve));
        child.kill("SIGKILL");
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
