import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import { parseConfig } from "../../src/config/load-config.js";
import type { ConfigInput } from "../../src/config/config-schema.js";

const SECRET = `whsec_${randomBytes(24).toString("base64")}`;

/** A small valid configuration, with `auth` and the channel's fields as given. */
function input(channel: Record<string, unknown> = {}, auth?: unknown, webhooks?: unknown) {
  return {
    auth: auth ?? { keys: [{ key: "sk-a-key-of-the-test", group: "g" }] },
    groups: { g: { models: ["*"] } },
    channels: [
      { name: "c", baseUrl: "http://127.0.0.1:9/v1", models: ["gpt-4o-mini"], ...channel },
    ],
    ...(webhooks ? { webhooks } : {}),
  } as unknown as ConfigInput;
}

function problemsOf(raw: ConfigInput, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseConfig(raw, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe("the configuration of background responses", () => {
  it("runs them itself by default; `native` sends background: true on to the channel", () => {
    expect(parseConfig(input()).channels[0]!.responses).toEqual({ background: "own" });
    expect(
      parseConfig(input({ responses: { background: "native" } })).channels[0]!.responses,
    ).toEqual({
      background: "native",
    });
    expect(problemsOf(input({ responses: { background: "yes" } }))).toEqual([
      "channels[0].responses.background: must be own or native",
    ]);
  });

  it("takes a key's webhookUrl with webhooks.secret (from the file or WEBHOOKS_SECRET), else names it", () => {
    const keys = {
      keys: [
        { key: "sk-a-key-of-the-test", group: "g", webhookUrl: "https://hooks.example.com/r" },
      ],
    };
    expect(parseConfig(input({}, keys, { secret: SECRET })).auth.keys[0]!.webhookUrl).toBe(
      "https://hooks.example.com/r",
    );
    expect(parseConfig(input({}, keys), { WEBHOOKS_SECRET: SECRET }).auth.keys[0]!.webhookUrl).toBe(
      "https://hooks.example.com/r",
    );
    expect(problemsOf(input({}, keys))).toEqual([
      "auth.keys[0].webhookUrl: needs webhooks.secret (or WEBHOOKS_SECRET): events are sent signed, and only then",
    ]);
    const notUrl = { keys: [{ key: "sk-a-key-of-the-test", group: "g", webhookUrl: "ftp://x" }] };
    expect(problemsOf(input({}, notUrl, { secret: SECRET }))).toEqual([
      "auth.keys[0].webhookUrl: must be a URL",
    ]);
  });
});
