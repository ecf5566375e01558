import { describe, expect, it } from "vitest";
import { bearerToken, createAuthenticate } from "../../src/auth/create-authenticator.js";
import { createStaticKeyLookup, hashSecret } from "../../src/auth/static-keys.js";
import { testConfig, TEST_KEYS } from "../support/start-test-app.js";

describe("static key lookup", () => {
  const keys = [
    { key: "sk-static-key-one-0001", group: "default", name: "one" },
    { key: "sk-static-key-two-0002", group: "premium" },
  ];

  it("finds each configured key, the same principal every time it is sent", () => {
    const lookup = createStaticKeyLookup(keys);
    const first = lookup("sk-static-key-one-0001");
    expect(first).toMatchObject({ group: "default", keyName: "one" });
    expect(lookup("sk-static-key-one-0001")).toBe(first);
    expect(lookup("sk-static-key-two-0002")).toMatchObject({
      group: "premium",
      keyName: `key_${hashSecret("sk-static-key-two-0002").slice(0, 12)}`,
    });
  });

  it("refuses every other token, however often it is sent", () => {
    const lookup = createStaticKeyLookup(keys);
    for (let i = 0; i < 3; i += 1) {
      expect(lookup("sk-static-key-one-0001x")).toBeUndefined();
      expect(lookup("")).toBeUndefined();
      expect(lookup(hashSecret("sk-static-key-one-0001"))).toBeUndefined();
    }
    expect(lookup("sk-static-key-one-0001")).toMatchObject({ keyName: "one" });
  });
});

describe("the authenticator's configured keys", () => {
  const config = testConfig("http://127.0.0.1:9/v1");

  it("are found at once, the same principal as the authenticator's; other tokens are not", async () => {
    const authenticate = createAuthenticate(config);
    const found = authenticate.configured?.(TEST_KEYS.default);
    expect(found).toMatchObject({ group: "default" });
    expect(await authenticate(TEST_KEYS.default)).toBe(found);
    expect(authenticate.configured?.("sk-not-configured-0001")).toBeUndefined();
  });

  it("are named by the bearer token of an Authorization header, as the header check reads it", () => {
    expect(bearerToken("Bearer sk-a-key")).toBe("sk-a-key");
    expect(bearerToken("bearer \t sk-a-key  ")).toBe("sk-a-key");
    expect(bearerToken("Bearer sk-a key")).toBeUndefined();
    expect(bearerToken("Basic c2s6a2V5")).toBeUndefined();
    expect(bearerToken("Bearer ")).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
});
