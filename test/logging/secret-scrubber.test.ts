import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logging/create-logger.js";
import { redactUrl, redactUrlsIn } from "../../src/logging/redact-url.js";
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

  it("masks the query parameters named like a credential, in any case, and keeps the rest", () => {
    expect(redactUrl("redis://h:6379/0?password=hunter2-123")).toBe(
      "redis://h:6379/0?password=***",
    );
    expect(redactUrl("redis://:pw@h/0?db=1&Access_Key=ak-123#frag")).toBe(
      "redis://:***@h/0?db=1&Access_Key=***#frag",
    );
    expect(redactUrl("https://s3.example/b?X-Amz-Security-Token=t&X-Amz-Date=1&api%5Fkey=k")).toBe(
      "https://s3.example/b?X-Amz-Security-Token=***&X-Amz-Date=1&api%5Fkey=***",
    );
    expect(redactUrl("rediss+sentinel://h1:26379,h2:26379/m?sentinelPassword=sp-1&x=1")).toBe(
      "rediss+sentinel://h1:26379,h2:26379/m?sentinelPassword=***&x=1",
    );
    expect(redactUrl("redis+cluster://:pw-9@h1:7000,h2:7000?token=t-9")).toBe(
      "redis+cluster://:***@h1:7000,h2:7000?token=***",
    );
    expect(redactUrl("http://h/v1/models?model=gpt-4o")).toBe("http://h/v1/models?model=gpt-4o");
  });

  it("in running text, masks the URLs that hold a credential and leaves every other as written", () => {
    expect(
      redactUrlsIn(
        "cannot reach redis://h:1/0?password=pw-123 (WRONGPASS); GET http://GW:3000/v1/models answered 404",
      ),
    ).toBe(
      "cannot reach redis://h:1/0?password=*** (WRONGPASS); GET http://GW:3000/v1/models answered 404",
    );
    expect(redactUrlsIn("at rediss://tok-123@cache:6380.")).not.toContain("tok-123");
  });
});

describe("credentials in a URL's query", () => {
  it("are found in the configuration and the environment, as written and decoded", () => {
    expect(
      configSecrets({
        store: { url: "redis://h:6379/0?db=2&password=query-pass%2F01" },
        images: { url: "s3://bucket/p?access_key=ak-in-query-01" },
        channels: [{ baseUrl: "http://gw/v1?model=not-a-secret-0001" }],
      }).sort(),
    ).toEqual(["ak-in-query-01", "query-pass%2F01", "query-pass/01"].sort());
    expect(
      envSecrets({
        SIDECAR_STORE: "redis+sentinel://h1:1,h2:2/m?password=env-query-pass-1",
      }),
    ).toEqual(["env-query-pass-1"]);
  });
});
