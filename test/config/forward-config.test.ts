import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { describeAuth } from "../../src/cli/describe-auth.js";
import { ConfigError } from "../../src/config/config-error.js";
import { loadConfig, parseConfig } from "../../src/config/load-config.js";

const BASE = `groups:
  default: { models: ["*"] }
channels:
  - name: newapi
    baseUrl: http://127.0.0.1:3000/v1
    models: ["*"]
  - name: demo
    type: demo
    models: ["gpt-4o-mini"]
`;

function parse(yaml: string, env: NodeJS.ProcessEnv = {}) {
  return parseConfig(parseYaml(yaml), env);
}

function problemsOf(yaml: string, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parse(yaml, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error("expected the configuration to be refused");
}

describe("auth.forward", () => {
  it("is off by default", () => {
    expect(parse(BASE).auth.forward).toBeUndefined();
  });

  it("fills in its defaults: 60 s cache, 5 s refusal cache, 10 s check timeout, 10000 keys, 16 checks at once, 50 a second, 4 and 5 per client address, no secret", () => {
    const config = parse(`${BASE}auth:\n  forward: { channel: newapi }\n`);
    expect(config.auth.forward).toEqual({
      channel: "newapi",
      cacheSec: 60,
      refusalCacheSec: 5,
      timeoutSec: 10,
      maxCachedKeys: 10_000,
      maxChecksInFlight: 16,
      maxChecksPerSec: 50,
      maxChecksInFlightPerClient: 4,
      maxChecksPerClientPerSec: 5,
    });
  });

  it("needs a secret on a redis:// store (STORE_URL too), saying why and how to make one", () => {
    for (const [yaml, env] of [
      [
        `${BASE}store: { url: "redis://127.0.0.1:6379" }\nauth:\n  forward: { channel: newapi }\n`,
        {},
      ],
      [`${BASE}auth:\n  forward: { channel: newapi }\n`, { STORE_URL: "rediss://cache:6380/1" }],
    ] as const) {
      const problems = problemsOf(yaml, env);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(/^auth\.forward\.secret: required with a redis:\/\/ store: /);
      expect(problems[0]).toContain("openssl rand -base64 48");
    }
    const secret = "s".repeat(64);
    const config = parse(
      `${BASE}store: { url: "redis://127.0.0.1:6379" }\nauth:\n  forward: { channel: newapi, secret: ${secret} }\n`,
    );
    expect(config.auth.forward?.secret).toBe(secret);
    // SQLite and memory stores keep theirs apart on their own.
    expect(
      parse(`${BASE}store: { url: "sqlite://./x.db" }\nauth:\n  forward: { channel: newapi }\n`)
        .auth.forward?.secret,
    ).toBeUndefined();
  });

  it("takes every field, numbers also as text from ${VAR}", () => {
    const config = parse(
      `${BASE}auth:
  forward:
    channel: newapi
    cacheSec: \${CACHE}
    refusalCacheSec: 2
    timeoutSec: 3
    maxCachedKeys: 50
    secret: \${FORWARD_SECRET}
`,
      { CACHE: "120", FORWARD_SECRET: "s".repeat(32) },
    );
    expect(config.auth.forward).toMatchObject({ cacheSec: 120, secret: "s".repeat(32) });
  });

  it("must name a configured channel of type openai", () => {
    expect(problemsOf(`${BASE}auth:\n  forward: { channel: nowhere }\n`)).toEqual([
      'auth.forward.channel: unknown channel "nowhere"',
    ]);
    expect(problemsOf(`${BASE}auth:\n  forward: { channel: demo }\n`)).toEqual([
      'auth.forward.channel: channel "demo" is of type demo; forward mode needs an openai channel',
    ]);
    expect(problemsOf(`${BASE}auth:\n  forward: {}\n`)).toEqual([
      "auth.forward.channel: must name a channel",
    ]);
  });

  it("refuses a short secret, and an unset ${VAR} for it, naming the variable", () => {
    expect(problemsOf(`${BASE}auth:\n  forward: { channel: newapi, secret: short }\n`)).toEqual([
      "auth.forward.secret: must be at least 32 characters",
    ]);
    expect(
      problemsOf(`${BASE}auth:\n  forward: { channel: newapi, secret: "\${FORWARD_SECRET}" }\n`),
    ).toEqual([
      "auth.forward.secret: must be at least 32 characters (environment variable FORWARD_SECRET is not set)",
    ]);
  });

  it("refuses zero or negative durations and unknown fields", () => {
    expect(
      problemsOf(
        `${BASE}auth:\n  forward: { channel: newapi, cacheSec: 0, refusalCacheSec: -1, timeoutSec: x, cache: 1 }\n`,
      ).sort(),
    ).toEqual([
      "auth.forward.cache: unknown field",
      "auth.forward.cacheSec: must be > 0",
      "auth.forward.refusalCacheSec: must be > 0",
      "auth.forward.timeoutSec: must be a number (seconds)",
    ]);
  });
});

describe("config/forward.yaml (the example in docs/forward-mode.md)", () => {
  it("is valid with its variables set", () => {
    const { config, warnings } = loadConfig({
      file: new URL("../../config/forward.yaml", import.meta.url).pathname,
      env: { ADMIN_KEY: "sk-admin", FORWARD_SECRET: "f".repeat(44) },
    });
    expect(warnings).toEqual([]);
    expect(config.auth.forward).toMatchObject({ channel: "newapi", cacheSec: 60 });
    expect(describeAuth(config.auth)).toContain(
      'forward: unknown bearer keys are checked against channel "newapi"',
    );
  });
});

describe("describeAuth (check-config and the banner)", () => {
  it("explains forward mode in one line beside keys and JWT", () => {
    const config = parse(
      `${BASE}auth:
  keys: [{ key: sk-a, group: default }, { key: sk-b, group: default }]
  jwt: { secret: s }
  forward: { channel: newapi, secret: "${"x".repeat(40)}" }
`,
    );
    const line = describeAuth(config.auth);
    expect(line).toBe(
      'auth: 2 keys, JWT (HS256), forward: unknown bearer keys are checked against channel "newapi" (GET /v1/models, cached 60 s, refusals 5 s)',
    );
    expect(line).not.toContain("sk-a");
    expect(line).not.toContain("x".repeat(40));
  });

  it("says so when nothing can get in", () => {
    expect(describeAuth(parse(BASE).auth)).toBe("auth: 0 keys, every request is refused");
    expect(
      describeAuth(parse(`${BASE}auth:\n  jwt: { jwksUrl: "https://id.example/jwks" }\n`).auth),
    ).toBe("auth: 0 keys, JWT (JWKS)");
  });
});
