import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import { DEFAULT_CONFIG_FILE, loadConfig } from "../../src/config/load-config.js";
import { keyLimits } from "../../src/tasks/service/key-limits.js";

/** The specification's example, exactly as written there. */
const SPEC_EXAMPLE = `server:
  port: 8080
  publicBaseUrl: http://localhost:8080   # optional; base of image URLs
store:
  url: memory://        # memory:// | sqlite://./data/sidecar.db | redis://host:6379/0
auth:
  keys:
    - key: sk-alice
      group: default
    - key: sk-bob
      group: vip
  jwt:                   # optional: bearer JWTs, verified with jose
    secret: \${JWT_SECRET}   # HS256 shared secret, or jwksUrl: https://.../jwks.json
    issuer: https://issuer.example
    audience: image-task-sidecar
    groupClaim: group
groups:
  default:
    models: ["gpt-4o-mini", "gpt-image-*"]
  vip:
    models: ["*"]
channels:
  - name: primary
    baseUrl: http://127.0.0.1:9000/v1
    apiKey: \${UPSTREAM_KEY}
    models: ["gpt-4o-mini", "gpt-4o", "gpt-image-1", "dall-e-3"]
    priority: 0
    weight: 1
imageTasks:
  timeoutSec: 600
  maxConcurrent: 2
  maxQueued: 1000
  retentionSec: 86400
`;

const EXAMPLE_FILE = "config/example.yaml";
const SECRETS = { JWT_SECRET: "jwt-secret-for-tests", UPSTREAM_KEY: "sk-upstream-for-tests" };

const dir = mkdtempSync(join(tmpdir(), "sidecar-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function yamlFile(text: string): string {
  const file = join(dir, `config-${++files}.yaml`);
  writeFileSync(file, text);
  return file;
}

/** The problems loading `file` reports; fails the test when it loads. */
function problemsOf(file: string, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    loadConfig({ file, env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error(`expected ${file} to be refused`);
}

const MINIMAL = `groups:
  default: { models: ["*"] }
channels:
  - name: one
    baseUrl: http://127.0.0.1:9000/v1
    models: ["gpt-4o-mini"]
`;

describe("loadConfig", () => {
  it("accepts the specification's example as written, with JWT_SECRET and UPSTREAM_KEY set", () => {
    const { config, file } = loadConfig({ file: yamlFile(SPEC_EXAMPLE), env: SECRETS });
    expect(file).toMatch(/config-\d+\.yaml$/);
    expect(config.server).toMatchObject({ port: 8080, publicBaseUrl: "http://localhost:8080" });
    expect(config.store.url).toBe("memory://");
    expect(config.auth.keys).toEqual([
      { key: "sk-alice", group: "default" },
      { key: "sk-bob", group: "vip" },
    ]);
    expect(config.auth.jwt).toMatchObject({
      secret: SECRETS.JWT_SECRET,
      issuer: "https://issuer.example",
      audience: "image-task-sidecar",
      groupClaim: "group",
    });
    expect(config.groups).toEqual({
      default: { models: ["gpt-4o-mini", "gpt-image-*"] },
      vip: { models: ["*"] },
    });
    expect(config.channels).toHaveLength(1);
    expect(config.channels[0]).toMatchObject({
      name: "primary",
      baseUrl: "http://127.0.0.1:9000/v1",
      apiKey: SECRETS.UPSTREAM_KEY,
      models: ["gpt-4o-mini", "gpt-4o", "gpt-image-1", "dall-e-3"],
      priority: 0,
      weight: 1,
    });
    expect(config.imageTasks).toMatchObject({
      timeoutSec: 600,
      maxConcurrent: 2,
      maxQueued: 1000,
      retentionSec: 86400,
    });
  });

  it("ships config/example.yaml as the specification's example", () => {
    const shipped = loadConfig({ file: EXAMPLE_FILE, env: SECRETS }).config;
    expect(shipped).toEqual(loadConfig({ file: yamlFile(SPEC_EXAMPLE), env: SECRETS }).config);
  });

  it("accepts the example with its variables unset, warning with the field and the variable", () => {
    const loaded = loadConfig({ file: EXAMPLE_FILE, env: {} });
    expect(loaded.config.auth.jwt?.secret).toBe("");
    expect(loaded.config.channels[0]?.apiKey).toBe("");
    expect(loaded.warnings).toEqual([
      'auth.jwt.secret: environment variable JWT_SECRET is not set or empty; using ""',
      'channels[0].apiKey: environment variable UPSTREAM_KEY is not set or empty; using ""',
    ]);
    expect(loadConfig({ file: EXAMPLE_FILE, env: SECRETS }).warnings).toEqual([]);
  });

  it("uses ${VAR:-default} when VAR is unset or empty, and VAR when set", () => {
    const file = yamlFile(
      MINIMAL.replace("http://127.0.0.1:9000/v1", "${BASE:-http://127.0.0.1:7000/v1}") +
        "    apiKey: ${KEY:-}\nauth:\n  keys:\n    - key: ${DEMO_KEY:-sk-fallback}\n      group: default\n",
    );
    const unset = loadConfig({ file, env: {} }).config;
    expect(unset.channels[0]?.baseUrl).toBe("http://127.0.0.1:7000/v1");
    expect(unset.channels[0]?.apiKey).toBe("");
    expect(unset.auth.keys[0]?.key).toBe("sk-fallback");
    expect(loadConfig({ file, env: { DEMO_KEY: "" } }).config.auth.keys[0]?.key).toBe(
      "sk-fallback",
    );
    const set = loadConfig({
      file,
      env: { BASE: "https://gw.example/v1", KEY: "sk-k", DEMO_KEY: "sk-set" },
    }).config;
    expect(set.channels[0]?.baseUrl).toBe("https://gw.example/v1");
    expect(set.channels[0]?.apiKey).toBe("sk-k");
    expect(set.auth.keys[0]?.key).toBe("sk-set");
  });

  it("substitutes after parsing YAML, so a value with YAML syntax stays one string", () => {
    const file = yamlFile(MINIMAL + "    apiKey: ${KEY}\n");
    const key = "sk-x\nchannels: []\n# : {";
    expect(loadConfig({ file, env: { KEY: key } }).config.channels[0]?.apiKey).toBe(key);
  });

  it("lets PORT, STORE_URL, IMAGE_ASYNC_TIMEOUT_SEC and IMAGE_ASYNC_MAX_CONCURRENT override the file", () => {
    const { config } = loadConfig({
      file: EXAMPLE_FILE,
      env: {
        ...SECRETS,
        PORT: "9191",
        STORE_URL: "sqlite://./data/other.db",
        IMAGE_ASYNC_TIMEOUT_SEC: "45",
        IMAGE_ASYNC_MAX_CONCURRENT: "7",
      },
    });
    expect(config.server.port).toBe(9191);
    expect(config.store.url).toBe("sqlite://./data/other.db");
    expect(config.imageTasks.timeoutSec).toBe(45);
    expect(config.imageTasks.maxConcurrent).toBe(7);
    expect(config.imageTasks.maxQueued).toBe(1000);
  });

  it("applies the overrides to sections the file leaves out, and defaults to 600 s and 2", () => {
    const file = yamlFile(MINIMAL);
    const defaults = loadConfig({ file, env: {} }).config;
    expect(defaults.server.port).toBe(8080);
    expect(defaults.imageTasks.timeoutSec).toBe(600);
    expect(defaults.imageTasks.maxConcurrent).toBe(2);
    const overridden = loadConfig({
      file,
      env: { PORT: "0", IMAGE_ASYNC_TIMEOUT_SEC: "5", IMAGE_ASYNC_MAX_CONCURRENT: "1" },
    }).config;
    expect(overridden.server.port).toBe(0);
    expect(overridden.imageTasks).toMatchObject({ timeoutSec: 5, maxConcurrent: 1 });
  });

  it("refuses an override that is not a whole number, naming the variable", () => {
    expect(
      problemsOf(yamlFile(MINIMAL), { PORT: "eighty", IMAGE_ASYNC_MAX_CONCURRENT: "-1" }),
    ).toEqual([
      "PORT: must be a whole number",
      "IMAGE_ASYNC_MAX_CONCURRENT: must be a whole number",
    ]);
    expect(problemsOf(yamlFile(MINIMAL), { IMAGE_ASYNC_MAX_CONCURRENT: "0" })).toEqual([
      "IMAGE_ASYNC_MAX_CONCURRENT: must be > 0 (the variable overrides imageTasks.maxConcurrent)",
    ]);
    expect(problemsOf(yamlFile(MINIMAL), { STORE_URL: "mongodb://x" })).toEqual([
      "STORE_URL: must start with memory://, sqlite://, redis://, redis+sentinel:// or redis+cluster:// (rediss for TLS) (the variable overrides store.url)",
    ]);
  });

  it("loads the embedded config/default.yaml: demo channel, SQLite store, demo key", () => {
    const { config, file } = loadConfig({ env: {} });
    expect(file).toBe(DEFAULT_CONFIG_FILE);
    expect(config.server.port).toBe(8080);
    expect(config.store.url).toMatch(/^sqlite:\/\//);
    expect(config.channels[0]?.type).toBe("demo");
    expect(config.auth.keys[0]?.key).toBe("sk-demo-image-task-sidecar");
    expect(config.imageTasks).toMatchObject({ timeoutSec: 600, maxConcurrent: 2 });
    expect(loadConfig({ env: { DEMO_API_KEY: "sk-mine" } }).config.auth.keys[0]?.key).toBe(
      "sk-mine",
    );
  });

  it("reads CONFIG_FILE when no file is given", () => {
    const file = yamlFile(MINIMAL);
    expect(loadConfig({ env: { CONFIG_FILE: file } }).file).toBe(file);
  });
});

describe("invalid configurations", () => {
  it("gives one line per problem, each naming its field", () => {
    const file = yamlFile(`server:
  port: 70000
  prot: 8080
store:
  url: mongodb://localhost
auth:
  keys:
    - key: sk-a
groups:
  default:
    models: []
channels:
  - name: primary
    baseUrl: not a url
    models: ["gpt-4o-mini"]
    weight: 0
  - name: second
    baseUrl: ftp://example.com/v1
    models: gpt-4o
    timeoutSec: soon
imageTasks:
  maxConcurrent: 0
logging:
  level: loud
`);
    expect(problemsOf(file).sort()).toEqual(
      [
        "server.port: must be between 0 and 65535",
        "server.prot: unknown field",
        "store.url: must start with memory://, sqlite://, redis://, redis+sentinel:// or redis+cluster:// (rediss for TLS)",
        "auth.keys[0].group: must be a group name",
        "groups.default.models: must list at least one model id or glob",
        "channels[0].baseUrl: must be a URL",
        "channels[0].weight: must be > 0",
        "channels[1].baseUrl: must be a URL",
        "channels[1].models: must be a list of model ids or globs",
        "channels[1].timeoutSec: must be a number (seconds)",
        "imageTasks.maxConcurrent: must be > 0",
        "logging.level: must be one of fatal, error, warn, info, debug, trace, silent",
      ].sort(),
    );
  });

  it("reports a channel's missing baseUrl as the spec's example line", () => {
    const file = yamlFile(MINIMAL.replace("    baseUrl: http://127.0.0.1:9000/v1\n", ""));
    expect(problemsOf(file)).toEqual(["channels[0].baseUrl: must be a URL"]);
  });

  it("reports cross-field problems: unknown groups, duplicate channels, secret and jwksUrl", () => {
    const file = yamlFile(`auth:
  keys:
    - key: sk-a
      group: admins
  jwt:
    secret: s
    jwksUrl: https://issuer.example/jwks.json
groups:
  default: { models: ["*"] }
channels:
  - { name: one, baseUrl: "http://a.example/v1", models: ["m"] }
  - { name: one, baseUrl: "http://b.example/v1", models: ["m"] }
`);
    expect(problemsOf(file).sort()).toEqual([
      "auth.jwt: must set exactly one of secret and jwksUrl",
      'auth.keys[0].group: unknown group "admins"',
      'channels[1].name: duplicate channel name "one"',
    ]);
  });

  it("requires groups and at least one channel", () => {
    expect(problemsOf(yamlFile("server:\n  port: 8080\n"))).toEqual([
      "groups: must map group names to {models}",
      "channels: must list at least one channel",
    ]);
    expect(problemsOf(yamlFile("groups: {}\nchannels: []\n"))).toEqual([
      "channels: must list at least one channel",
    ]);
  });

  it("names the file when it cannot be read or is not YAML", () => {
    const missing = join(dir, "missing.yaml");
    const [unreadable] = problemsOf(missing);
    expect(unreadable).toContain(missing);
    expect(unreadable).toContain("ENOENT");
    const broken = yamlFile("server: [unclosed\n");
    const [notYaml] = problemsOf(broken);
    expect(notYaml).toContain(broken);
    expect(notYaml).toContain("not valid YAML");
  });

  it("never puts a secret into a problem line", () => {
    const file = yamlFile(SPEC_EXAMPLE.replace("http://127.0.0.1:9000/v1", "nope"));
    const problems = problemsOf(file, SECRETS);
    expect(problems).toEqual(["channels[0].baseUrl: must be a URL"]);
    expect(problems.join("\n")).not.toContain(SECRETS.UPSTREAM_KEY);
    expect(problems.join("\n")).not.toContain(SECRETS.JWT_SECRET);
  });
});

describe("${VAR} in numeric and boolean fields", () => {
  it("reads numbers and booleans from substituted text", () => {
    const file = yamlFile(
      `${MINIMAL}server:\n  port: \${MY_PORT:-18305}\n  trustProxy: \${TRUST}\nimageTasks:\n  maxConcurrent: \${MAXC}\n`,
    );
    const { config } = loadConfig({ file, env: { MAXC: "3", TRUST: "true" } });
    expect(config.server.port).toBe(18305);
    expect(config.server.trustProxy).toBe(true);
    expect(config.imageTasks.maxConcurrent).toBe(3);
    expect(problemsOf(file, { MAXC: "three", TRUST: "true" })).toEqual([
      "imageTasks.maxConcurrent: must be a number (tasks) (the value comes from MAXC)",
    ]);
  });
});

describe("store", () => {
  it("takes redis:// and rediss:// with a prefix, and refuses other schemes naming the field", () => {
    const file = yamlFile(
      `${MINIMAL}store:\n  url: redis://127.0.0.1:6379/0\n  prefix: "{prod}:sidecar"\n`,
    );
    const { config } = loadConfig({ file, env: {} });
    expect(config.store).toEqual({
      url: "redis://127.0.0.1:6379/0",
      prefix: "{prod}:sidecar",
      connectTimeoutSec: 10,
      commandTimeoutSec: 5,
      minReplicas: 0,
    });
    expect(loadConfig({ file: yamlFile(MINIMAL), env: {} }).config.store.prefix).toBe(
      "image-task-sidecar",
    );
    expect(
      loadConfig({ file, env: { STORE_URL: "rediss://cache.internal:6380/1" } }).config.store.url,
    ).toBe("rediss://cache.internal:6380/1");
    expect(problemsOf(file, { STORE_URL: "mongodb://x" })).toEqual([
      "STORE_URL: must start with memory://, sqlite://, redis://, redis+sentinel:// or redis+cluster:// (rediss for TLS) (the variable overrides store.url)",
    ]);
    expect(problemsOf(yamlFile(`${MINIMAL}store:\n  prefix: "has space"\n`))).toEqual([
      "store.prefix: must be 1-64 letters, digits or _ . : - { }",
    ]);
  });

  it("takes per-group task limits, and refuses a bad one naming the field", () => {
    const withGroup = (limits: string) =>
      yamlFile(
        MINIMAL.replace(
          'default: { models: ["*"] }',
          `default: { models: ["*"], imageTasks: ${limits} }`,
        ),
      );
    const file = withGroup("{ maxQueuedPerKey: 3 }");
    const { config } = loadConfig({ file, env: {} });
    expect(config.groups.default?.imageTasks).toEqual({ maxQueuedPerKey: 3 });
    expect(config.imageTasks).toMatchObject({ leaseSec: 30 });
    // The group's own share, with the held limit derived from it; others get the defaults.
    expect(keyLimits(config, "default")).toEqual({ maxQueuedPerKey: 3, maxRetainedPerKey: 30 });
    expect(keyLimits(config, "unknown")).toEqual({ maxQueuedPerKey: 100, maxRetainedPerKey: 1000 });
    expect(problemsOf(withGroup("{ maxRetainedPerKey: 0 }"))).toEqual([
      "groups.default.imageTasks.maxRetainedPerKey: must be > 0",
    ]);
  });
});
