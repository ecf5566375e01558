import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "../redis.js";
import { redisCommand, type RedisAddress } from "./resp-command.js";

/** One `redis-server` (or sentinel) process a test started. */
export interface RedisProcess extends RedisAddress {
  /** `master`, `replica-1`, `sentinel-2`, `node-3`...: names its folder and error messages. */
  readonly name: string;
  readonly dir: string;
  readonly logFile: string;
  /** The cluster bus port (`cluster-port`), for cluster nodes. */
  readonly busPort?: number;
  /** Whether the process has exited. */
  isDead(): boolean;
  /** SIGKILL; resolves once it has exited (at once when it already had). */
  kill(): Promise<void>;
  /** The last lines of its log file and of its stderr, for error messages. */
  logTail(lines?: number): string;
}

/** Options of {@link startRedisProcess}. */
export interface StartRedisProcessOptions {
  name: string;
  /** The deployment's temp dir; the process gets `<parentDir>/<name>`. */
  parentDir: string;
  /** Config lines after the defaults (later lines win), given the ports picked. */
  config(ports: { port: number; busPort: number | undefined }): string[];
  /** Runs it as a sentinel (`redis-server <file> --sentinel`). Default false. */
  sentinel?: boolean;
  /** Picks a cluster bus port too. Default false. */
  clusterBus?: boolean;
  /** The password its readiness `PING` needs. */
  password?: string;
  /** How long to wait for its first `PONG`. Default 10 s. */
  readyTimeoutMs?: number;
}

const HOST = "127.0.0.1";

/*
 * Runs redis-server in place of the shell (same pid, so signals and exit
 * events are its own) beside a watchdog that reads the shell's stdin, a pipe
 * from this process: when this process ends, however it ends (a test
 * runner's SIGKILL included, where no exit handler runs), the pipe closes
 * and the watchdog SIGKILLs redis-server.
 */
const WATCHED_REDIS = [
  "exec 3<&0",
  '(cat <&3 >/dev/null 2>&1; kill -9 "$$" 2>/dev/null) >/dev/null 2>&1 &',
  'exec redis-server "$@" 3<&- </dev/null',
].join("\n");
/** Every process not yet seen to exit, killed on exit as a last resort. */
const running = new Set<ChildProcess>();
/** Ports handed out and not yet bound, so parallel starts never pick the same one. */
const handedOut = new Set<number>();
let exitHookInstalled = false;

/**
 * Starts a `redis-server` on free ports of 127.0.0.1 with a config file in
 * its own folder (nothing saved: `save ""`, `appendonly no`, and diskless
 * replication without the default 5 s delay), and resolves once it answers
 * `PING`. A port taken between picking and binding is retried with new
 * ports; any other failure rejects with the tail of the process's log.
 */
export async function startRedisProcess(options: StartRedisProcessOptions): Promise<RedisProcess> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startOnce(options);
    } catch (err) {
      if (attempt >= 4 || !(err instanceof PortTakenError)) throw err;
    }
  }
}

class PortTakenError extends Error {}

async function startOnce(options: StartRedisProcessOptions): Promise<RedisProcess> {
  const port = await pickPort();
  const busPort = options.clusterBus ? await pickPort() : undefined;
  try {
    const dir = join(options.parentDir, options.name);
    await mkdir(dir, { recursive: true });
    const logFile = join(dir, "redis.log");
    const configFile = join(dir, "redis.conf");
    const lines = [
      `port ${port}`,
      `bind ${HOST}`,
      `dir ${dir}`,
      `logfile ${logFile}`,
      ...(options.sentinel ? [] : ['save ""', "appendonly no", "repl-diskless-sync-delay 0"]),
      ...(busPort === undefined ? [] : [`cluster-port ${busPort}`]),
      ...options.config({ port, busPort }),
    ];
    await writeFile(configFile, `${lines.join("\n")}\n`);
    const child = spawn(
      "sh",
      ["-c", WATCHED_REDIS, "sh", configFile, ...(options.sentinel ? ["--sentinel"] : [])],
      { stdio: ["pipe", "ignore", "pipe"] },
    );
    child.stdin?.on("error", () => undefined);
    track(child);
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4_000);
    });
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once("exit", () => resolve());
    });
    const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));
    const node: RedisProcess = {
      name: options.name,
      host: HOST,
      port,
      busPort,
      dir,
      logFile,
      isDead: () => child.exitCode !== null || child.signalCode !== null,
      async kill() {
        if (!node.isDead()) child.kill("SIGKILL");
        await exited;
        // Lets the watchdog go.
        child.stdin?.destroy();
      },
      logTail: (count = 15) => tailOf(logFile, stderr, count),
    };
    await waitUntilAnswering(node, options, spawnError);
    return node;
  } finally {
    handedOut.delete(port);
    if (busPort !== undefined) handedOut.delete(busPort);
  }
}

async function waitUntilAnswering(
  node: RedisProcess,
  options: StartRedisProcessOptions,
  spawnError: Promise<Error>,
): Promise<void> {
  let failedToSpawn: Error | undefined;
  void spawnError.then((err) => (failedToSpawn = err));
  const deadline = Date.now() + (options.readyTimeoutMs ?? 10_000);
  let lastError = "";
  while (Date.now() < deadline) {
    if (failedToSpawn)
      throw new Error(`${options.name}: cannot run redis-server (${failedToSpawn.message})`);
    if (node.isDead()) {
      const tail = node.logTail();
      if (/Address already in use/.test(tail)) throw new PortTakenError(tail);
      throw new Error(`${options.name} (port ${node.port}) exited at start-up:\n${tail}`);
    }
    try {
      const reply = await redisCommand(node, ["PING"], {
        password: options.password,
        timeoutMs: 1_000,
      });
      if (reply === "PONG") return;
      lastError = String(reply);
    } catch (err) {
      lastError = (err as Error).message;
    }
    await sleep(25);
  }
  await node.kill();
  throw new Error(
    `${options.name} (port ${node.port}) did not answer PING in ${options.readyTimeoutMs ?? 10_000} ms (${lastError}):\n${node.logTail()}`,
  );
}

/** A free port of 127.0.0.1 that no start under way in this process has picked. */
async function pickPort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

function track(child: ChildProcess): void {
  running.add(child);
  child.once("exit", () => running.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // The last resort when a test run ends without stop(): no redis-server outlives it.
  process.on("exit", () => {
    for (const leftover of running) leftover.kill("SIGKILL");
  });
}

function tailOf(logFile: string, stderr: string, count: number): string {
  let log = "";
  try {
    log = readFileSync(logFile, "utf8");
  } catch {
    log = "(no log file)";
  }
  const lines = log.trimEnd().split("\n").slice(-count);
  if (stderr.trim()) lines.push("stderr:", ...stderr.trimEnd().split("\n").slice(-count));
  return lines.map((line) => `  ${line}`).join("\n");
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Calls `check` every `intervalMs` until it answers something other than
 * undefined, and resolves that; after `timeoutMs` rejects with `what`, the
 * last reason `check` gave (its thrown error or `describe()`), and `details()`.
 */
export async function pollUntil<T>(
  what: string,
  check: () => Promise<T | undefined>,
  options: { timeoutMs: number; intervalMs?: number; details?: () => string },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  let lastReason = "";
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      lastReason = (err as Error).message;
    }
    if (Date.now() >= deadline) break;
    await sleep(options.intervalMs ?? 100);
  }
  const details = options.details?.() ?? "";
  throw new Error(
    `timed out after ${options.timeoutMs} ms waiting for ${what}${lastReason ? ` (last: ${lastReason})` : ""}${details ? `\n${details}` : ""}`,
  );
}
