import { execFile } from "node:child_process";
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { onTestFinished } from "vitest";

/** What a program printed, and how it ended. */
export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * A fresh directory for code copied from the console, removed after the
 * test, with the project's `node_modules` beside it (so `import OpenAI from
 * "openai"` finds the official SDK, as after `npm install openai`).
 */
export async function snippetDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "console-snippet-"));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  await symlink(resolve("node_modules"), join(dir, "node_modules"), "dir");
  return dir;
}

/** Runs `file` with `args` in `cwd`, the key in `OPENAI_API_KEY` only; never throws. */
export function run(
  file: string,
  args: string[],
  cwd: string,
  key: string,
  extraEnv: Record<string, string> = {},
): Promise<RunResult> {
  return new Promise((done) => {
    execFile(
      file,
      args,
      {
        cwd,
        timeout: 60_000,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", OPENAI_API_KEY: key, ...extraEnv },
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        done({ code, stdout, stderr });
      },
    );
  });
}

/** Runs a copied curl command with bash, as pasted in a shell where the key is exported. */
export function runCurl(code: string, cwd: string, key: string): Promise<RunResult> {
  return run("bash", ["-c", code], cwd, key);
}

/** Saves copied JavaScript as `image-task.mjs` in `dir` and runs it with this Node. */
export async function runNode(code: string, dir: string, key: string): Promise<RunResult> {
  await writeFile(join(dir, "image-task.mjs"), code);
  return run(process.execPath, ["image-task.mjs"], dir, key);
}
