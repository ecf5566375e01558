import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import { loadMcpConfig } from "../../src/config/mcp-config.js";

describe("loadMcpConfig", () => {
  it("reads the three variables and normalises them", () => {
    expect(
      loadMcpConfig({
        OPENAI_BASE_URL: " http://localhost:8080/v1/ ",
        OPENAI_API_KEY: "sk-alice",
        IMAGE_OUTPUT_DIR: "~/pictures",
      }),
    ).toEqual({
      apiBaseUrl: "http://localhost:8080/v1",
      apiKey: "sk-alice",
      outputDir: path.join(os.homedir(), "pictures"),
    });
  });

  it("defaults the output directory to ./generated-images and the key to none", () => {
    const config = loadMcpConfig({
      OPENAI_BASE_URL: "https://img.example.com/v1",
      OPENAI_API_KEY: "",
    });
    expect(config.outputDir).toBe(path.resolve("generated-images"));
    expect(config.apiKey).toBeUndefined();
  });

  it.each([
    [{}, /^OPENAI_BASE_URL: is required/],
    [{ OPENAI_BASE_URL: "  " }, /^OPENAI_BASE_URL: is required/],
    [{ OPENAI_BASE_URL: "localhost:8080" }, /^OPENAI_BASE_URL: must be an http\(s\) URL/],
    [{ OPENAI_BASE_URL: "file:///etc" }, /^OPENAI_BASE_URL: must be an http\(s\) URL/],
  ])("rejects %j with a line naming the variable", (env, message) => {
    try {
      loadMcpConfig(env);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems).toHaveLength(1);
      expect((error as ConfigError).problems[0]).toMatch(message);
    }
  });
});
