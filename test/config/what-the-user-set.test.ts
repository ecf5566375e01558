import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import { parseConfig } from "../../src/config/load-config.js";

/*
 * Start-up's configuration lines name what the user set: the variable when a
 * variable set the field, else the field; and a setup that passes the schema
 * but cannot work (two listeners on one port, one key in two groups, a bucket
 * S3 would refuse) is refused with a line that says what is wrong.
 */

const BASE = `groups:
  default: { models: ["*"] }
  vip: { models: ["*"] }
channels:
  - name: one
    baseUrl: http://127.0.0.1:9000/v1
    models: ["gpt-image-1"]
`;

const parse = (yaml: string, env: NodeJS.ProcessEnv = {}) => parseConfig(parseYaml(yaml), env);

function problemsOf(yaml: string, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parse(yaml, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error("expected the configuration to be refused");
}

describe("a problem line names the variable that set the field", () => {
  it("LOG_LEVEL and STORE_URL, not logging.level and store.url (which the file set right)", () => {
    const file = `${BASE}logging: { level: info }\nstore: { url: "memory://" }\n`;
    expect(problemsOf(file, { LOG_LEVEL: "verbose" })).toEqual([
      "LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent (the variable overrides logging.level)",
    ]);
    // One line: not a second one about Sentinel URLs for a URL that is no Redis URL at all.
    expect(problemsOf(file, { STORE_URL: "redis:/x" })).toEqual([
      "STORE_URL: must start with memory://, sqlite://, redis://, redis+sentinel:// or redis+cluster:// (rediss for TLS) (the variable overrides store.url)",
    ]);
    expect(problemsOf(file, { IMAGES_URL: "s3://My_Bucket/p" })[0]).toMatch(/^IMAGES_URL: /);
  });

  it("names the field and the variable its ${VAR} took the value from", () => {
    expect(problemsOf(`${BASE}logging: { level: "\${MY_LEVEL}" }\n`, { MY_LEVEL: "loud" })).toEqual(
      [
        "logging.level: must be one of fatal, error, warn, info, debug, trace, silent (the value comes from MY_LEVEL)",
      ],
    );
  });

  it("takes WEBHOOKS_SECRET and WEBHOOKS_ALLOW_PRIVATE_NETWORKS without a file section", () => {
    const secret = `whsec_${Buffer.alloc(24, 7).toString("base64")}`;
    const config = parse(BASE, {
      WEBHOOKS_SECRET: secret,
      WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "true",
    });
    expect(config.webhooks).toMatchObject({ secret, allowPrivateNetworks: true });
    expect(parse(BASE).webhooks).toMatchObject({ allowPrivateNetworks: false });
    expect(problemsOf(BASE, { WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "yes" })).toEqual([
      "WEBHOOKS_ALLOW_PRIVATE_NETWORKS: must be true or false (the variable overrides webhooks.allowPrivateNetworks)",
    ]);
    const bad = problemsOf(BASE, { WEBHOOKS_SECRET: "not-a-secret" });
    expect(bad).toEqual([
      "WEBHOOKS_SECRET: must start with whsec_ followed by base64 (the variable overrides webhooks.secret)",
    ]);
  });
});

describe("setups that pass the schema but cannot work", () => {
  it("refuses metrics.port equal to server.port, or to PORT", () => {
    expect(problemsOf(`${BASE}server: { port: 9100 }\nmetrics: { port: 9100 }\n`)).toEqual([
      "metrics.port: is also server.port (9100): the metrics listener needs a port of its own; pick another, or leave metrics.port unset to serve /metrics on the service's port",
    ]);
    expect(problemsOf(`${BASE}metrics: { port: 9100 }\n`, { PORT: "9100" })).toEqual([
      "metrics.port: is also server.port (set by PORT) (9100): the metrics listener needs a port of its own; pick another, or leave metrics.port unset to serve /metrics on the service's port",
    ]);
    // 0 picks a free port for each listener.
    expect(parse(`${BASE}server: { port: 0 }\nmetrics: { port: 0 }\n`).metrics.port).toBe(0);
    expect(parse(`${BASE}metrics: { port: 9100 }\n`).metrics.port).toBe(9100);
  });

  it("refuses one key listed twice, in two groups or in one", () => {
    const keys = (...entries: string[]) => `${BASE}auth:\n  keys:\n${entries.join("")}`;
    const entry = (key: string, group: string) => `    - { key: "${key}", group: ${group} }\n`;
    expect(
      problemsOf(keys(entry("sk-a", "default"), entry("sk-b", "vip"), entry("sk-a", "vip"))),
    ).toEqual([
      'auth.keys[2].key: is the same key as auth.keys[0].key, which is in group "default", not "vip": a key belongs to one group; list it once',
    ]);
    expect(problemsOf(keys(entry("sk-a", "default"), entry("sk-a", "default")))).toEqual([
      "auth.keys[1].key: is the same key as auth.keys[0].key: list each key once",
    ]);
    // Two keys from one variable: both the same key.
    expect(
      problemsOf(keys(entry("${K1}", "default"), entry("${K2}", "vip")), {
        K1: "sk-x",
        K2: "sk-x",
      }),
    ).toEqual([
      'auth.keys[1].key: is the same key as auth.keys[0].key, which is in group "default", not "vip": a key belongs to one group; list it once (the value comes from K2)',
    ]);
  });

  it("refuses an S3 bucket name that breaks the naming rules, saying which rule", () => {
    const problem = (url: string) => problemsOf(`${BASE}images: { url: "${url}" }\n`)[0];
    expect(problem("s3://My_Bucket/p")).toBe(
      'images.url: the bucket name "My_Bucket" breaks S3\'s naming rules: only lowercase letters, digits, dots and hyphens are allowed (not "M", "_", "B"); no capital letters',
    );
    expect(problem("s3://ab/p")).toBe(
      'images.url: the bucket name "ab" breaks S3\'s naming rules: it must be 3 to 63 characters long (it has 2)',
    );
    expect(problem(`s3://${"a".repeat(64)}`)).toMatch(/3 to 63 characters long \(it has 64\)$/);
    expect(problem("s3://-images/p")).toMatch(
      /must start and end with a lowercase letter or a digit$/,
    );
    expect(problem("s3://images-/p")).toMatch(
      /must start and end with a lowercase letter or a digit$/,
    );
    expect(problem("s3://my..images")).toMatch(/must not hold two dots in a row$/);
    expect(problem("s3://192.168.5.4/p")).toMatch(/must not be an IP address$/);
    expect(problem("s3://xn--images")).toMatch(/names starting with "xn--" are reserved$/);
    expect(problem("s3://images-s3alias")).toMatch(/names ending with "-s3alias" are reserved$/);
    expect(problem("s3:///prefix")).toBe(
      "images.url: names no bucket: write s3://<bucket>[/<prefix>]",
    );
    expect(problem("s3://images/a b")).toMatch(/^images\.url: the prefix "a b" may hold only/);
    for (const good of ["s3://images", "s3://my-bucket/some/prefix", "s3://a.b-c.123/x_y/"]) {
      expect(parse(`${BASE}images: { url: "${good}" }\n`).images.url).toBe(good);
    }
  });
});
