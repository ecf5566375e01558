import { randomBytes } from "node:crypto";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import { parseConfig } from "../../src/config/load-config.js";

const BASE = `groups:
  default: { models: ["*"] }
channels:
  - name: one
    baseUrl: http://127.0.0.1:9000/v1
    models: ["gpt-image-1"]
`;

function parse(yaml: string, env: NodeJS.ProcessEnv = {}) {
  return parseConfig(parseYaml(yaml), env);
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

const secret24 = `whsec_${randomBytes(24).toString("base64")}`;

describe("webhooks config", () => {
  it("defaults: no secret (webhooks refused), 8 attempts over about a day, public receivers only", () => {
    expect(parse(BASE).webhooks).toEqual({
      maxAttempts: 8,
      retryScheduleSec: [5, 300, 1800, 7200, 18000, 36000, 36000],
      allowPrivateNetworks: false,
      timeoutSec: 15,
      maxConcurrent: 32,
    });
  });

  it("takes a whsec_ secret of 24 to 64 bytes, also from ${VAR}, and numbers as text", () => {
    const secret64 = `whsec_${randomBytes(64).toString("base64")}`;
    expect(parse(`${BASE}webhooks: { secret: ${secret64} }\n`).webhooks.secret).toBe(secret64);
    const config = parse(
      `${BASE}webhooks:\n  secret: \${HOOK_SECRET}\n  maxAttempts: \${HOOK_ATTEMPTS}\n  allowPrivateNetworks: "true"\n`,
      { HOOK_SECRET: secret24, HOOK_ATTEMPTS: "3" },
    );
    expect(config.webhooks).toMatchObject({
      secret: secret24,
      maxAttempts: 3,
      allowPrivateNetworks: true,
    });
  });

  it("an empty secret (an unset ${VAR}) is no secret", () => {
    expect(parse(`${BASE}webhooks:\n  secret: \${UNSET_HOOK_SECRET}\n`).webhooks.secret).toBe(
      undefined,
    );
  });

  it("refuses a malformed secret, naming the field and what is wrong", () => {
    const cases: Array<[string, RegExp]> = [
      ["not-a-secret", /must start with whsec_/],
      [`${randomBytes(24).toString("base64")}`, /must start with whsec_/],
      ["whsec_abc!", /standard, padded base64/],
      [`whsec_${randomBytes(24).toString("base64url")}_-`, /standard, padded base64/],
      [`whsec_${randomBytes(32).toString("base64").replace(/=+$/, "")}`, /padded base64/],
      [`whsec_${randomBytes(16).toString("base64")}`, /24 to 64 bytes .* \(it encodes 16\)/],
      [`whsec_${randomBytes(65).toString("base64")}`, /24 to 64 bytes/],
    ];
    for (const [secret, message] of cases) {
      const problems = problemsOf(`${BASE}webhooks: { secret: "${secret}" }\n`);
      expect(problems, secret).toHaveLength(1);
      expect(problems[0], secret).toMatch(/^webhooks\.secret: /);
      expect(problems[0], secret).toMatch(message);
    }
  });

  it("refuses bad attempts, schedules, timeouts and unknown fields, naming each", () => {
    const problems = problemsOf(
      `${BASE}webhooks:\n  maxAttempts: 0\n  retryScheduleSec: []\n  timeoutSec: -1\n  maxConcurrent: 1.5\n  retries: 3\n`,
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^webhooks\.maxAttempts: /),
        expect.stringMatching(/^webhooks\.retryScheduleSec: must list at least one wait/),
        expect.stringMatching(/^webhooks\.timeoutSec: /),
        expect.stringMatching(/^webhooks\.maxConcurrent: /),
        expect.stringMatching(/webhooks\.retries/),
      ]),
    );
    expect(problemsOf(`${BASE}webhooks: { retryScheduleSec: [5, -1] }\n`)).toEqual([
      expect.stringMatching(/^webhooks\.retryScheduleSec\[1\]: must be >= 0/),
    ]);
  });
});
