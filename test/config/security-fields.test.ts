import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import { parseConfig } from "../../src/config/load-config.js";

// The configuration fields that bound what channels, tokens and scrapers can do.

const BASE = `groups:
  default: { models: ["*"] }
channels:
  - name: one
    baseUrl: http://127.0.0.1:9000/v1
    models: ["gpt-image-1"]
`;

function parse(yaml: string) {
  return parseConfig(parseYaml(yaml));
}

function problemsOf(yaml: string): string[] {
  try {
    parse(yaml);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error("expected the configuration to be refused");
}

describe("defaults", () => {
  it("downloads images from the channel's origin only, up to 32 MiB; JWTs need exp; /metrics open on the main port", () => {
    const config = parse(`${BASE}auth:\n  jwt: { secret: s }\n`);
    expect(config.channels[0]).toMatchObject({
      imageUrlOrigins: [],
      maxImageBytes: 32 * 1024 * 1024,
    });
    expect(config.auth.jwt?.requireExp).toBe(true);
    expect(config.metrics).toEqual({});
  });
});

describe("channels[].imageUrlOrigins", () => {
  it("keeps origins in their normalised form", () => {
    const config = parse(
      `${BASE}    imageUrlOrigins: ["https://CDN.example.com:443", "http://images.example:8080/"]\n`,
    );
    expect(config.channels[0]!.imageUrlOrigins).toEqual([
      "https://cdn.example.com",
      "http://images.example:8080",
    ]);
  });

  it("refuses anything but an http(s) origin, naming the entry", () => {
    for (const bad of [
      "https://cdn.example.com/images",
      "https://cdn.example.com/?x=1",
      "https://user:pw@cdn.example.com",
      "ftp://cdn.example.com",
      "cdn.example.com",
    ]) {
      expect(problemsOf(`${BASE}    imageUrlOrigins: ["${bad}"]\n`), bad).toEqual([
        "channels[0].imageUrlOrigins[0]: must be an http(s) origin such as https://cdn.example.com (no path)",
      ]);
    }
  });
});

describe("group names are looked up as own keys", () => {
  it("refuses keys and a JWT default group naming Object's members", () => {
    const problems = problemsOf(`groups:
  default: { models: ["*"] }
channels:
  - { name: one, baseUrl: "http://127.0.0.1:9000/v1", models: ["m"] }
auth:
  keys:
    - { key: sk-a, group: constructor }
    - { key: sk-b, group: toString }
  jwt: { secret: s, defaultGroup: hasOwnProperty }
`);
    expect(problems.sort()).toEqual([
      'auth.jwt.defaultGroup: unknown group "hasOwnProperty"',
      'auth.keys[0].group: unknown group "constructor"',
      'auth.keys[1].group: unknown group "toString"',
    ]);
  });
});

describe("metrics", () => {
  it("accepts a port, a host and a bearer token", () => {
    const config = parse(`${BASE}metrics: { port: 9464, host: 127.0.0.1, bearerToken: t0k }\n`);
    expect(config.metrics).toEqual({ port: 9464, host: "127.0.0.1", bearerToken: "t0k" });
  });

  it("refuses a port out of range and unknown fields", () => {
    expect(problemsOf(`${BASE}metrics: { port: 70000, token: x }\n`).sort()).toEqual([
      "metrics.port: must be between 0 and 65535",
      "metrics.token: unknown field",
    ]);
  });
});
