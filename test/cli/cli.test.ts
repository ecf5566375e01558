import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CLI, listeningUrlIn, spawnScript, type SpawnedScript } from "../support/serve-process.js";

const ROOT = resolve(import.meta.dirname, "../..");
const MAIN = join(ROOT, "dist/main.js");

const dir = mkdtempSync(join(tmpdir(), "sidecar-cli-"));
const children = new Set<ChildProcess>();

beforeAll(() => {
  if (!existsSync(CLI) || !existsSync(MAIN)) {
    throw new Error("dist/ is missing: run `npm run build` (npm ci runs it as `prepare`)");
  }
});
afterEach(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  children.clear();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Starts `node <script> ...args` in the test's directory; killed after each test. */
function run(script: string, args: string[], env: Record<string, string> = {}): SpawnedScript {
  const started = spawnScript(args, { cwd: dir, script, env });
  children.add(started.child);
  return started;
}

/** Resolves the service URL from the start-up banner. */
async function bannerUrl(started: SpawnedScript): Promise<string> {
  for (;;) {
    const url = listeningUrlIn(started.stdout());
    if (url) return url;
    if (started.child.exitCode !== null) {
      throw new Error(`exited ${started.child.exitCode}: ${started.stderr()}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

let files = 0;
function configFile(text: string): string {
  const file = join(dir, `config-${++files}.yaml`);
  writeFileSync(file, text);
  return file;
}

const INVALID = `groups:
  default: { models: ["*"] }
channels:
  - name: primary
    baseUrl: not-a-url
    apiKey: sk-secret-in-config
    models: ["gpt-4o-mini"]
    weight: -1
imageTasks:
  maxConcurrent: 0
`;
const EXPECTED_PROBLEMS = [
  "channels[0].baseUrl: must be a URL",
  "channels[0].weight: must be > 0",
  "imageTasks.maxConcurrent: must be > 0",
];

const VALID = `server:
  host: 127.0.0.1
store:
  url: memory://
auth:
  keys:
    - key: sk-cli-test
      group: default
groups:
  default: { models: ["*"] }
channels:
  - name: demo
    type: demo
    models: ["gpt-4o-mini", "gpt-image-1"]
    imageDelayMs: 0
logging:
  level: silent
`;

function problemLines(stderr: string): string[] {
  return stderr.split("\n").filter((line) => line.trim() !== "");
}

describe("image-task-sidecar check-config", () => {
  it("exits 2 on an invalid config, one line per problem naming the field", async () => {
    const checked = run(CLI, ["check-config", "--config", configFile(INVALID)]);
    expect(await checked.exited).toBe(2);
    expect(problemLines(checked.stderr()).sort()).toEqual(EXPECTED_PROBLEMS);
    expect(checked.stderr()).not.toContain("sk-secret-in-config");
  });

  it("exits 0 on a valid config", async () => {
    const file = configFile(VALID);
    const checked = run(CLI, ["check-config", "--config", file]);
    expect(await checked.exited).toBe(0);
    expect(checked.stdout()).toContain(file);
    expect(checked.stderr()).toBe("");
  });

  it("explains the auth mode in one line, forward mode included", async () => {
    const file = configFile(
      VALID.replace(
        "groups:",
        `  forward:
    channel: newapi
    secret: \${FORWARD_SECRET}
groups:`,
      ).replace(
        "channels:",
        `channels:
  - name: newapi
    baseUrl: http://127.0.0.1:3000/v1
    models: ["*"]`,
      ),
    );
    const checked = run(CLI, ["check-config", "--config", file], {
      FORWARD_SECRET: "forward-secret-for-the-cli-test-0123456789",
    });
    expect(await checked.exited).toBe(0);
    expect(checked.stdout()).toContain(
      'auth: 1 key, forward: unknown bearer keys are checked against channel "newapi" (GET /v1/models, cached 60 s, refusals 5 s)\n',
    );
    expect(checked.stdout()).not.toContain("forward-secret-for-the-cli-test");
  });

  it("accepts the example config with an unset variable, warning about it", async () => {
    const checked = run(CLI, ["check-config", "--config", join(ROOT, "config/example.yaml")], {
      JWT_SECRET: "s",
    });
    expect(await checked.exited).toBe(0);
    expect(checked.stderr()).toContain(
      'warning: channels[0].apiKey: environment variable UPSTREAM_KEY is not set or empty; using ""',
    );
    const ok = run(CLI, ["check-config", "--config", join(ROOT, "config/example.yaml")], {
      JWT_SECRET: "s",
      UPSTREAM_KEY: "k",
    });
    expect(await ok.exited).toBe(0);
  });

  it("exits 2 for an unknown command or option", async () => {
    const unknown = run(CLI, ["frobnicate"]);
    expect(await unknown.exited).toBe(2);
    expect(unknown.stderr()).toContain("Usage");
    const option = run(CLI, ["check-config", "--no-such-option"]);
    expect(await option.exited).toBe(2);
  });
});

describe("image-task-sidecar serve", () => {
  it("refuses to start on an invalid config with exit 2 and the problem lines", async () => {
    const served = run(CLI, ["serve", "--config", configFile(INVALID)], { PORT: "0" });
    expect(await served.exited).toBe(2);
    expect(problemLines(served.stderr()).sort()).toEqual(EXPECTED_PROBLEMS);
    expect(served.stdout()).not.toContain("listening");
  });

  it("refuses to start through npm start's entry with CONFIG_FILE invalid", async () => {
    const started = run(MAIN, [], { CONFIG_FILE: configFile(INVALID), PORT: "0" });
    expect(await started.exited).toBe(2);
    expect(problemLines(started.stderr()).sort()).toEqual(EXPECTED_PROBLEMS);
  });

  it("serves a valid config on PORT, answers the SDK, and exits 0 on SIGTERM", async () => {
    const served = run(CLI, ["serve", "--config", configFile(VALID)], { PORT: "0" });
    const url = await bannerUrl(served);
    expect(served.stdout()).not.toContain("sk-cli-test");
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const client = new OpenAI({ apiKey: "sk-cli-test", baseURL: `${url}/v1`, maxRetries: 0 });
    const models = await client.models.list();
    expect(models.data.map((model) => model.id)).toEqual(["gpt-4o-mini", "gpt-image-1"]);
    served.child.kill("SIGTERM");
    expect(await served.exited).toBe(0);
  });

  it("starts on the embedded demo defaults, printing the demo key and a curl line", async () => {
    // The banner for a person (a terminal, or LOG_FORMAT=pretty).
    const started = run(MAIN, [], { PORT: "0", LOG_FORMAT: "pretty" });
    const url = await bannerUrl(started);
    const banner = started.stdout();
    expect(banner).toContain("sk-demo-image-task-sidecar");
    expect(banner).toContain(`curl -s ${url}/v1/models`);
    // The web console, served from the built package, is one click away.
    expect(banner).toContain(`Web console: ${url}/console/`);
    const page = await fetch(`${url}/console/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await page.text()).toContain("<title>");
    // The demo key reaches every model: the demo binds this machine only, and says so.
    expect(new URL(url).hostname).toBe("127.0.0.1");
    expect(banner).toContain("binds 127.0.0.1 only");
    const client = new OpenAI({
      apiKey: "sk-demo-image-task-sidecar",
      baseURL: `${url}/v1`,
      maxRetries: 0,
    });
    const completion = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(completion.choices[0]?.message.content).toBeTruthy();
    expect(existsSync(join(dir, "data"))).toBe(true);
    started.child.kill("SIGTERM");
    expect(await started.exited).toBe(0);
  });
});
