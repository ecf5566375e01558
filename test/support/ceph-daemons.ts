import { execFile, spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, rmSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";

/*
 * Ceph's daemons as child processes of the test: started in the foreground
 * (`-f`, no fork, no systemd), ended with SIGKILL (their data is in memory and
 * thrown away; a ceph-osd asked with SIGTERM waits for a mon that may be gone).
 * Three nets so none outlives the test: `stop()`, a process `exit` hook (a
 * test that timed out never reaches its `finally`), and the kernel's
 * parent-death signal (setpriv --pdeathsig) for a test process killed outright.
 */

/** Every daemon started and not yet seen to exit, and the temp dirs not yet removed. */
const running = new Set<ChildProcess>();
const dirs = new Set<string>();
let exitHookInstalled = false;

function cleanUpOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const child of running) child.kill("SIGKILL");
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
}

/** Removes `dir` when the test process exits, unless {@link forgetDir} came first. */
export function removeOnExit(dir: string): void {
  cleanUpOnExit();
  dirs.add(dir);
}

/** `dir` has been removed: the `exit` hook leaves it alone. */
export function forgetDir(dir: string): void {
  dirs.delete(dir);
}

/** A daemon of the test cluster. */
export interface Daemon {
  name: string;
  child: ChildProcess;
  /** Resolves when it has exited, however. */
  exited: Promise<void>;
}

/**
 * Starts `command args` in `dir`, its stdout and stderr appended to
 * `dir/log/<name>.out`, SIGKILLed by the kernel if the test process dies.
 */
export function startDaemon(dir: string, name: string, command: string, args: string[]): Daemon {
  cleanUpOnExit();
  const out = openSync(join(dir, "log", `${name}.out`), "a");
  let child: ChildProcess;
  try {
    child = spawn("setpriv", ["--pdeathsig", "KILL", "--", command, ...args], {
      cwd: dir,
      stdio: ["ignore", out, out],
    });
  } finally {
    closeSync(out);
  }
  running.add(child);
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.once("error", () => resolve());
  }).then(() => {
    running.delete(child);
  });
  return { name, child, exited };
}

/** SIGKILLs it and waits for it to be gone. */
export async function killDaemon(daemon: Daemon): Promise<void> {
  if (daemon.child.exitCode === null && daemon.child.signalCode === null) {
    daemon.child.kill("SIGCONT");
    daemon.child.kill("SIGKILL");
  }
  await daemon.exited;
}

/**
 * Runs a Ceph tool to its end (at most `timeoutMs`); resolves its stdout,
 * rejects with its stderr.
 */
export function runTool(
  dir: string,
  command: string,
  args: string[],
  timeoutMs = 30_000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { cwd: dir, timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 4 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) {
          reject(new Error(`${command} ${args.join(" ")}: ${err.message}\n${stderr}`));
        } else {
          resolve(stdout);
        }
      },
    );
  });
}

/** The last lines of each daemon's log and output, for an error message when start-up fails. */
export async function logTails(dir: string, names: string[], lines = 15): Promise<string> {
  const tails = await Promise.all(
    names.flatMap((name) =>
      [`${name}.log`, `${name}.out`].map(async (file) => {
        const text = await readFile(join(dir, "log", file), "utf8").catch(() => "");
        const last = text.trimEnd().split("\n").slice(-lines).join("\n");
        return last ? `--- ${file}\n${last}` : "";
      }),
    ),
  );
  return tails.filter(Boolean).join("\n");
}
