import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logging/create-logger.js";
import { redactUrl } from "../../src/logging/redact-url.js";
import {
  configSecrets,
  createSecretScrubber,
  envSecrets,
} from "../../src/logging/secret-scrubber.js";

describe("configSecrets", () => {
  it("finds credentials by field name at any depth and in URLs, in sections it has never heard of", () => {
    const found = configSecrets({
      channels: [
        {
          name: "gateway-channel",
          apiKey: "sk-channel-0001",
          baseUrl: "http://u:p%40ssw0rd!@h/v1",
        },
      ],
      auth: { keys: [{ key: "sk-static-0001", group: "default-group" }] },
      someday: { s3: { accessKeyId: "AKIAEXAMPLE01", secretAccessKey: "aws-secret-0001" } },
      store: { url: "rediss://only-a-token-0001@cache:6380" },
      short: { secret: "tiny" },
      numbers: { maxCachedKeys: 10_000 },
    });
    expect(found.sort()).toEqual(
      [
        "sk-channel-0001",
        "p%40ssw0rd!",
        "p@ssw0rd!",
        "sk-static-0001",
        "AKIAEXAMPLE01",
        "aws-secret-0001",
        "only-a-token-0001",
      ].sort(),
    );
  });

  it("takes from the environment variables named like a credential, and URLs' credentials", () => {
    expect(
      envSecrets({
        AWS_SECRET_ACCESS_KEY: "aws-env-secret-01",
        UPSTREAM_KEY: "sk-env-upstream-01",
        REDIS_URL: "redis://:env-redis-pass@h:6379",
        npm_package_keywords_0: "kubernetes",
        HOME: "/home/someone",
      }).sort(),
    ).toEqual(["aws-env-secret-01", "env-redis-pass", "sk-env-upstream-01"].sort());
  });
});

describe("createSecretScrubber", () => {
  it("masks every occurrence, the longest first, also as JSON escapes it", () => {
    const scrub = createSecretScrubber([
      "sk-abc-12345678",
      "sk-abc-12345678-longer",
      'quo"te\\secret',
    ]);
    expect(scrub("a sk-abc-12345678-longer and sk-abc-12345678.")).toBe(
      "a [redacted] and [redacted].",
    );
    expect(scrub(JSON.stringify({ msg: 'x quo"te\\secret y' }))).toBe('{"msg":"x [redacted] y"}');
    expect(createSecretScrubber([])("unchanged")).toBe("unchanged");
  });

  it("runs on every line the logger writes, whatever field or message carries the secret", () => {
    let out = "";
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        out += chunk.toString("utf8");
        done();
      },
    });
    const logger = createLogger("debug", sink, ["sk-from-config-0001"]);
    logger.warn({ err: new Error("fetch http://u:sk-from-config-0001@h failed") }, "oops");
    logger.info({ nested: { deep: { value: "sk-from-config-0001" } } }, "sk-from-config-0001");
    expect(out).toContain("[redacted]");
    expect(out).not.toContain("sk-from-config-0001");
  });
});

describe("redactUrl", () => {
  it("masks a password, or a lone user name, and never shows what is not a URL", () => {
    expect(redactUrl("redis://user:pw-123@h:6379/0")).toBe("redis://user:***@h:6379/0");
    expect(redactUrl("rediss://token-123@h:6380")).toBe("rediss://***@h:6380");
    expect(redactUrl("sqlite://./data/sidecar.db")).toBe("sqlite://./data/sidecar.db");
    expect(redactUrl("not a url with secret-123")).toBe("(invalid URL)");
  });
});
