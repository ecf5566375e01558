import { spawn } from "node:child_process";
import { listeningUrlIn } from "../support/serve-process.js";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import { DEFAULT_CONFIG_FILE, loadConfig, parseConfig } from "../../src/config/load-config.js";

/*
 * A secret still holding an example's placeholder (`change-me`, `changeme`,
 * `your-...-here`) is refused at start-up and by `check-config`, one line
 * naming the setting (and the variable it came from), never the value. The
 * repository's own Secret example is what an operator copies: as written, it
 * is refused; the configurations meant to start still do.
 */

const ROOT = resolve(import.meta.dirname, "../..");
const CLI = join(ROOT, "dist/cli.js");
const OVERLAYS = join(ROOT, "deploy/kubernetes/overlays");

/** The variables of an overlay's `secret.example.env`, as `kubectl create secret --from-env-file` reads them. */
function exampleSecret(overlay: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(join(OVERLAYS, overlay, "secret.example.env"), "utf8")
      .split("\n")
      .filter((line) => line.includes("=") && !line.trimStart().startsWith("#"))
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
}

/** Runs the built CLI with only `env` (and PATH); resolves its exit code and output. */
function cli(args: string[], env: Record<string, string>) {
  if (!existsSync(CLI)) throw new Error("dist/ is missing: run `npm run build`");
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((done) =>
    child.once("exit", (code) => done({ code, stdout, stderr })),
  );
}

const PLACEHOLDER_LINE = /contains an example's placeholder \(change-me\), which anyone can read/;

describe.each(["single", "replicas"])(
  "the %s overlay with its secret.example.env as written",
  (overlay) => {
    const env = exampleSecret(overlay);
    const config = join(OVERLAYS, overlay, "config.yaml");

    it("is refused by check-config: exit 2, one line per setting, naming it and its variable", async () => {
      const { code, stdout, stderr } = await cli(["check-config", "--config", config], env);
      expect(code).toBe(2);
      expect(stdout).toBe("");
      const lines = stderr.trim().split("\n");
      expect(lines).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^auth\.keys\[0\]\.key: .*\(the value comes from CLIENT_KEY\)$/),
          expect.stringMatching(/^channels\[0\]\.apiKey: .*\(the value comes from UPSTREAM_KEY\)$/),
          expect.stringMatching(
            /^server\.urlSigningSecret: .*\(the value comes from URL_SIGNING_SECRET\)$/,
          ),
        ]),
      );
      for (const line of lines) expect(line).toMatch(PLACEHOLDER_LINE);
      for (const value of [env.CLIENT_KEY!, env.UPSTREAM_KEY!, env.URL_SIGNING_SECRET!]) {
        expect(stderr).not.toContain(value);
      }
    });

    it("does not start: serve exits 2 with the same lines", async () => {
      const { code, stdout, stderr } = await cli(["serve", "--config", config], env);
      expect(code).toBe(2);
      expect(listeningUrlIn(stdout)).toBeUndefined();
      expect(stderr).toMatch(/^auth\.keys\[0\]\.key: contains an example's placeholder/m);
    });

    it("passes with the placeholders replaced by real values", () => {
      const filled = Object.fromEntries(
        Object.entries(env).map(([name, value]) => [
          name,
          value.replace(/change-me/g, "k3pT-9vQx-2mWz"),
        ]),
      );
      expect(() => loadConfig({ file: config, env: filled })).not.toThrow();
    });
  },
);

/** The problem lines a configuration is refused with. */
function problemsOf(raw: unknown): string[] {
  try {
    parseConfig(raw);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

const base = {
  groups: { g: { models: ["*"] } },
  channels: [
    {
      name: "c",
      baseUrl: "http://127.0.0.1:9/v1",
      apiKey: "sk-real-channel-key",
      models: ["gpt-4o-mini"],
    },
  ],
};

describe("placeholders in every secret", () => {
  it("are refused in keys, the JWT, forward, signing and webhook secrets and the metrics token, in any spelling", () => {
    const problems = problemsOf({
      ...base,
      server: { urlSigningSecret: "CHANGEME-signing-secret-0123" },
      auth: {
        keys: [
          { key: "sk-real-client-key-1", group: "g" },
          { key: "your-api-key-here", group: "g" },
        ],
        jwt: { secret: "YOUR_JWT_SECRET_HERE" },
        forward: { channel: "c", secret: "change_me_change_me_change_me_0123" },
      },
      channels: [{ ...base.channels[0], apiKey: "sk-Change-Me" }],
      webhooks: { secret: `whsec_${Buffer.from("changeme-changeme-changeme").toString("base64")}` },
      metrics: { bearerToken: "please-change-me" },
    });
    const named = problems.map((line) => line.slice(0, line.indexOf(":")));
    expect(named.sort()).toEqual(
      [
        "auth.forward.secret",
        "auth.jwt.secret",
        "auth.keys[1].key",
        "channels[0].apiKey",
        "metrics.bearerToken",
        "server.urlSigningSecret",
      ].sort(),
    );
    expect(problems.find((line) => line.startsWith("auth.keys[1].key"))).toContain("your-...-here");
    expect(problems.join("\n")).not.toMatch(/sk-Change-Me|YOUR_JWT_SECRET_HERE|please-change-me/);
  });

  it("leaves real secrets alone, the webhook secret's random base64 included", () => {
    expect(
      problemsOf({
        ...base,
        auth: { keys: [{ key: "sk-exchange-meter-reader", group: "g" }] },
        webhooks: { secret: `whsec_${Buffer.alloc(32, 7).toString("base64")}` },
      }),
    ).toEqual([]);
  });
});

describe("the configurations meant to start", () => {
  it("still load: the embedded demo defaults, and config/*.yaml with their variables set", () => {
    expect(() => loadConfig({ file: DEFAULT_CONFIG_FILE, env: {} })).not.toThrow();
    const env = {
      JWT_SECRET: "a-real-jwt-secret-0123456789",
      UPSTREAM_KEY: "sk-a-real-upstream-key",
      ADMIN_KEY: "sk-a-real-admin-key",
      FORWARD_SECRET: "a-real-forward-secret-0123456789abcdef",
    };
    for (const file of readdirSync(join(ROOT, "config")).filter((name) => name.endsWith(".yaml"))) {
      expect(() => loadConfig({ file: join(ROOT, "config", file), env }), file).not.toThrow();
    }
  });
});
