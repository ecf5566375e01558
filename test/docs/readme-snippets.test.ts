import { slow } from "../support/time-factor.js";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { blocksOf, type MarkdownBlock } from "./markdown.js";

/*
 * The README's runnable blocks run against the service on its embedded demo
 * defaults (`node dist/main.js`, as `npm start` runs it; `npm test` builds
 * dist/ first), started on a free port with its data in a temporary
 * directory. `localhost:8080` in a block becomes that port.
 *
 * The convention: every `sh`/`bash`/`shell` and `js`/`mjs` block of README.md
 * runs, in order, the shell blocks in one bash session (variables carry over)
 * with `set -euo pipefail` and curl failing on an HTTP error, the JavaScript
 * blocks as ES modules with the repository's node_modules. A block that is not
 * meant to run as it stands carries an HTML comment on the line before it,
 * invisible on the rendered page:
 *
 *     <!-- not-run: why (e.g. it installs and starts the service itself) -->
 *
 * Blocks of other languages (json, yaml, text, ...) are never run.
 */

const ROOT = resolve(import.meta.dirname, "../..");
const SHELL = new Set(["sh", "bash", "shell"]);
const SCRIPT = new Set(["js", "mjs", "javascript"]);

let service: ChildProcess;
let port: number;
let work: string;
let serviceLog = "";

function freePort(): Promise<number> {
  return new Promise((done, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

/** The README's blocks that run. */
function runnable(blocks: MarkdownBlock[]): MarkdownBlock[] {
  return blocks.filter(
    (block) => !block.notRun && (SHELL.has(block.lang) || SCRIPT.has(block.lang)),
  );
}

/** A block's code against the service this test started. */
const withPort = (code: string) =>
  code.replace(/(localhost|127\.0\.0\.1):8080/g, `127.0.0.1:${port}`);

interface Outcome {
  status: number | null;
  output: string;
}

/** Runs shell blocks in one bash session; a failure names its block. */
function runShell(blocks: MarkdownBlock[]): Outcome {
  const script = ["set -euo pipefail"];
  for (const block of blocks) script.push(`echo "@@ ${block.where}" >&2`, withPort(block.code));
  const run = spawnSync("bash", ["-c", script.join("\n")], {
    cwd: work,
    encoding: "utf8",
    timeout: 120_000,
    // curl reads $HOME/.curlrc: an HTTP error status fails the block.
    env: { ...process.env, HOME: work, CURL_HOME: work },
  });
  return { status: run.status, output: `${run.stdout}\n${run.stderr}` };
}

function runScript(block: MarkdownBlock): Outcome {
  // Inside the repository, so `import OpenAI from "openai"` finds its node_modules.
  const file = join(ROOT, "test/docs", `.snippet-${process.pid}-${block.line}.mjs`);
  writeFileSync(file, withPort(block.code));
  try {
    const run = spawnSync(process.execPath, [file], {
      cwd: work,
      encoding: "utf8",
      timeout: 120_000,
    });
    return { status: run.status, output: `${run.stdout}\n${run.stderr}` };
  } finally {
    rmSync(file, { force: true });
  }
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "sidecar-readme-"));
  writeFileSync(join(work, ".curlrc"), "fail-with-body\nshow-error\nmax-time = 90\n");
  port = await freePort();
  service = spawn(process.execPath, [join(ROOT, "dist/main.js")], {
    cwd: work,
    env: { ...process.env, PORT: String(port), CONFIG_FILE: "", STORE_URL: "", LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  service.stdout!.on("data", (chunk: Buffer) => (serviceLog += chunk.toString()));
  service.stderr!.on("data", (chunk: Buffer) => (serviceLog += chunk.toString()));
  for (let i = 0; i < 300; i += 1) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the service did not start:\n${serviceLog}`);
}, slow(60_000));

afterAll(async () => {
  if (service && service.exitCode === null) {
    const exited = new Promise((done) => service.once("exit", done));
    service.kill("SIGTERM");
    await exited;
  }
  rmSync(work, { recursive: true, force: true });
});

describe("README.md's runnable blocks, against the demo defaults", () => {
  const blocks = blocksOf(ROOT, "README.md");

  it("marks every block it does not run, and runs the tour", () => {
    const shown = blocks.filter((block) => SHELL.has(block.lang) || SCRIPT.has(block.lang));
    expect(shown.filter((block) => block.notRun).map((block) => block.where)).not.toEqual([]);
    expect(runnable(blocks).length).toBeGreaterThanOrEqual(4);
  });

  it(
    "runs every shell block in order, each answered 2xx",
    () => {
      const shell = runnable(blocks).filter((block) => SHELL.has(block.lang));
      const outcome = runShell(shell);
      expect(outcome.status, `${outcome.output}\nservice:\n${serviceLog}`).toBe(0);
      // The tour saves the task's image: a real PNG, fetched by its signed URL.
      const pictures = readdirSync(work).filter((file) => file.endsWith(".png"));
      expect(pictures.length).toBeGreaterThan(0);
      for (const picture of pictures) {
        expect(readFileSync(join(work, picture)).subarray(1, 4).toString()).toBe("PNG");
      }
    },
    slow(150_000),
  );

  it.each(runnable(blocks).filter((block) => SCRIPT.has(block.lang)))(
    "runs the script at $where",
    (block) => {
      const outcome = runScript(block);
      expect(outcome.status, outcome.output).toBe(0);
    },
    slow(150_000),
  );

  it("fails a block that gets an HTTP error, naming it (the run can fail)", () => {
    const [first] = runnable(blocks).filter((block) => SHELL.has(block.lang));
    const broken = {
      ...first!,
      where: "README.md:0",
      code: `curl -s http://127.0.0.1:${port}/v1/no-such-route -H "Authorization: Bearer x"`,
    };
    const outcome = runShell([broken]);
    expect(outcome.status).not.toBe(0);
    expect(outcome.output).toContain("@@ README.md:0");
  });
});
