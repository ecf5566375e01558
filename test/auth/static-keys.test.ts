import { describe, expect, it } from "vitest";
import { createStaticKeyLookup, hashSecret } from "../../src/auth/static-keys.js";

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
