import { describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/config/config-error.js";
import { parseConfig } from "../../../src/config/load-config.js";

// The configuration of async channels and of the drain, as an operator writes it.

function config(channel: Record<string, unknown>, more: Record<string, unknown> = {}) {
  return {
    auth: { keys: [{ key: "sk-a", group: "g" }] },
    groups: { g: { models: ["*"] } },
    channels: [
      { name: "c", baseUrl: "http://127.0.0.1:9/v1", models: ["gpt-image-1"], ...channel },
    ],
    ...more,
  };
}

function problemsOf(raw: unknown, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseConfig(raw, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error("the configuration was accepted");
}

describe("channels[].async", () => {
  it("takes the three dialects, with pollSec 3 by default", () => {
    for (const dialect of ["sub2api", "bifrost"]) {
      const [channel] = parseConfig(config({ async: dialect })).channels;
      expect(channel).toMatchObject({ async: dialect, pollSec: 3 });
    }
    const [background] = parseConfig(
      config({ async: "openai-background", responsesModel: "gpt-4.1-mini", pollSec: "5" }),
    ).channels;
    expect(background).toMatchObject({ responsesModel: "gpt-4.1-mini", pollSec: 5 });
    expect(parseConfig(config({})).channels[0]!.async).toBeUndefined();
  });

  it("refuses openai-background without responsesModel, and unknown dialects, naming the field", () => {
    expect(problemsOf(config({ async: "openai-background" }))).toEqual([
      "channels[0].responsesModel: required with async: openai-background (the Responses model that runs the tool)",
    ]);
    expect(problemsOf(config({ async: "kling" }))).toEqual([
      "channels[0].async: must be sub2api, bifrost or openai-background",
    ]);
    expect(problemsOf(config({ async: "sub2api", pollSec: 0 }))).toEqual([
      "channels[0].pollSec: must be > 0",
    ]);
  });
});

describe("server.shutdownGraceSec", () => {
  it("defaults to the task timeout plus 30 s, whichever way the timeout is set", () => {
    expect(parseConfig(config({})).server.shutdownGraceSec).toBe(630);
    expect(
      parseConfig(config({}, { imageTasks: { timeoutSec: 200 } })).server.shutdownGraceSec,
    ).toBe(230);
    expect(parseConfig(config({}), { IMAGE_ASYNC_TIMEOUT_SEC: "90" }).server.shutdownGraceSec).toBe(
      120,
    );
    expect(
      parseConfig(config({}, { server: { shutdownGraceSec: 10 } })).server.shutdownGraceSec,
    ).toBe(10);
  });
});
