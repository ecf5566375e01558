import { slow } from "../support/time-factor.js";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { listeningUrlIn } from "../support/serve-process.js";
import { afterAll, describe, expect, it, onTestFinished } from "vitest";
import { isAlive } from "../support/process-alive.js";

/*
 * `kill -TERM <pid of npm start>` stops the service: npm passes the signal to
 * its script's process, and the script must not be a shell that keeps node
 * running as an orphan. A real `npm start` (the npm on PATH), on a free PORT
 * and a memory store.
 */

const ROOT = resolve(import.meta.dirname, "../..");
const dir = mkdtempSync(join(tmpdir(), "npm-start-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Whether something accepts connections on 127.0.0.1:port. */
function listening(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      done(true);
    });
    socket.once("error", () => done(false));
  });
}

/** Every process below `pid`, children first. */
function descendants(pid: number): number[] {
  let out = "";
  try {
    out = execFileSync("pgrep", ["-P", String(pid)], { encoding: "utf8" });
  } catch {
    return []; // none
  }
  return out
    .split("\n")
    .filter(Boolean)
    .map(Number)
    .flatMap((child) => [child, ...descendants(child)]);
}

describe("npm start", () => {
  it(
    "stops on kill -TERM of the npm process: the port closes and no process is left",
    async () => {
      const config = join(dir, "config.yaml");
      writeFileSync(
        config,
        JSON.stringify({
          server: { host: "127.0.0.1" },
          store: { url: "memory://" },
          auth: { keys: [{ key: "sk-npm-start", group: "default" }] },
          groups: { default: { models: ["*"] } },
          channels: [{ name: "demo", type: "demo", models: ["*"] }],
        }),
      );
      const npm = spawn("npm", ["start", "--silent"], {
        cwd: ROOT,
        // Port 0: the service takes a free one and names it in its banner (a port picked here and
        // handed over could be taken meanwhile by another test's connection).
        env: { PATH: process.env.PATH ?? "", HOME: dir, CONFIG_FILE: config, PORT: "0" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      npm.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
      npm.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
      const exited = new Promise<number | string>((done) =>
        npm.once("exit", (code, signal) => done(code ?? signal ?? "unknown")),
      );
      let below: number[] = [];
      onTestFinished(() => {
        for (const pid of [...below, npm.pid!]) if (isAlive(pid)) process.kill(pid, "SIGKILL");
      });
      const deadline = Date.now() + 30_000;
      while (!listeningUrlIn(stdout)?.startsWith("http://127.0.0.1:")) {
        if (npm.exitCode !== null || Date.now() > deadline) {
          throw new Error(`npm start did not start: ${stdout}\n${stderr}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      const url = listeningUrlIn(stdout)!;
      const port = Number(new URL(url).port);
      expect(port).toBeGreaterThan(0);
      below = descendants(npm.pid!);
      expect(below.length).toBeGreaterThan(0);
      expect(await listening(port)).toBe(true);

      process.kill(npm.pid!, "SIGTERM");
      expect(await exited).toBe(0);
      // stdout is no terminal here: the banner and the shutdown are JSON lines among the others.
      const lines = stdout
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as { msg: string; signal?: string; url?: string });
      expect(lines.find((line) => line.msg === "started")?.url).toBe(url);
      expect(lines.filter((line) => line.signal === "SIGTERM").map((line) => line.msg)).toEqual([
        "stopping",
        "stopped",
      ]);
      expect(stdout.split("\n").filter((line) => line !== "" && !line.startsWith("{"))).toEqual(
        expect.not.arrayContaining([expect.stringContaining("listening")]),
      );
      expect(await listening(port)).toBe(false);
      // The service's node exits with npm, not after it as an orphan.
      const left = below.filter(isAlive);
      expect(left, `still running: ${left.join(", ")}`).toEqual([]);
    },
    slow(60_000),
  );
});
