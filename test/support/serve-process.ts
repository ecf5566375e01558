import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { onTestFinished } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
/** The package's bin, as `npm run build` leaves it. */
export const CLI = join(ROOT, "dist/cli.js");

/** A service running as its own process, as an operator starts it. */
export interface ServedProcess extends SpawnedScript {
  /** `http://127.0.0.1:PORT`, from the start-up banner. */
  url: string;
}

/** Writes `config` (JSON is YAML) into `dir` and resolves the file's path. */
export async function writeConfig(dir: string, name: string, config: unknown): Promise<string> {
  const file = join(dir, `${name}.yaml`);
  await writeFile(file, JSON.stringify(config, null, 2));
  return file;
}

/** A script running as its own process: what it printed so far, and its exit. */
export interface SpawnedScript {
  child: ChildProcess;
  /** Everything written to stdout and to stderr so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves the exit code (or the signal's name) once the process is gone. */
  exited: Promise<number | string>;
}

/**
 * Starts `node <script> ...args` (the package's bin unless `script` names another) in `cwd`,
 * with only PATH and `env` set. The caller stops it (see {@link spawnServe}).
 */
export function spawnScript(
  args: string[],
  options: { cwd: string; script?: string; env?: NodeJS.ProcessEnv },
): SpawnedScript {
  const script = options.script ?? CLI;
  if (!existsSync(script)) throw new Error(`${script} is missing: run \`npm run build\``);
  const child = spawn(process.execPath, [script, ...args], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? "", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | string>((done) =>
    child.once("exit", (code, signal) => done(code ?? signal ?? "unknown")),
  );
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

/** What a run of a script printed, and how it exited (the code, or the signal's name). */
export interface FinishedRun {
  code: number | string;
  stdout: string;
  stderr: string;
}

/** {@link spawnScript}, resolved once the script has exited. */
export async function runToExit(
  args: string[],
  options: { cwd: string; script?: string; env?: NodeJS.ProcessEnv },
): Promise<FinishedRun> {
  const run = spawnScript(args, options);
  const code = await run.exited;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

/** Starts `image-task-sidecar serve --config FILE`; SIGKILLed when the test ends. */
export function spawnServe(
  configFile: string,
  cwd: string,
  env: NodeJS.ProcessEnv = {},
): SpawnedScript {
  const started = spawnScript(["serve", "--config", configFile], {
    cwd,
    env: { LOG_LEVEL: "silent", ...env },
  });
  onTestFinished(() => {
    const { child } = started;
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  return started;
}

/** Starts the service and resolves once it listens. */
export async function serve(
  configFile: string,
  cwd: string,
  env: NodeJS.ProcessEnv = {},
): Promise<ServedProcess> {
  const started = spawnServe(configFile, cwd, env);
  const gone = started.exited.then((code) => {
    throw new Error(`serve exited (${code}) before listening: ${started.stderr()}`);
  });
  gone.catch(() => undefined);
  for (;;) {
    const url = listeningUrlIn(started.stdout());
    if (url) {
      return { ...started, url };
    }
    await Promise.race([new Promise((r) => setTimeout(r, 20)), gone]);
  }
}

/**
 * The URL a starting service prints: in its banner (`listening on <url>`, on a terminal or
 * with `LOG_FORMAT=pretty`) or its `started` JSON line (stdout not a terminal, the default in
 * tests); undefined until it has printed one.
 */
export function listeningUrlIn(stdout: string): string | undefined {
  const text = /listening on (http:\/\/[^\s"]+)/.exec(stdout);
  if (text) return text[1];
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      const parsed = JSON.parse(line) as { msg?: unknown; url?: unknown };
      if (parsed.msg === "started" && typeof parsed.url === "string") return parsed.url;
    } catch {
      // not a JSON line
    }
  }
  return undefined;
}
