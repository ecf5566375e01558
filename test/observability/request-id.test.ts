import { describe, expect, it } from "vitest";
import { newRequestId, requestIdOf } from "../../src/observability/request-id.js";

/** What `crypto.randomUUID` writes: lower-case hex, version 4, variant 10xx. */
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("request ids", () => {
  it("are random version 4 UUIDs, written as randomUUID writes them, across pool refills", () => {
    // 2,000 ids take 32,000 random bytes: the 4 KiB pool is refilled several times.
    const ids = Array.from({ length: 2000 }, () => newRequestId());
    for (const id of ids) expect(id).toMatch(UUID_V4);
    expect(new Set(ids).size).toBe(ids.length);
    // Every hex digit that is not fixed takes many values (the bytes are random, not reused).
    for (const at of [0, 7, 9, 15, 20, 35]) {
      expect(new Set(ids.map((id) => id[at])).size).toBeGreaterThan(10);
    }
    // The variant digit takes its four values.
    expect(new Set(ids.map((id) => id[19]))).toEqual(new Set(["8", "9", "a", "b"]));
  });

  it("take a sane X-Request-Id as it is, and make one for anything else", () => {
    expect(requestIdOf("abc-123:x.y_z")).toBe("abc-123:x.y_z");
    expect(requestIdOf(undefined)).toMatch(UUID_V4);
    expect(requestIdOf(["a", "b"])).toMatch(UUID_V4);
    expect(requestIdOf("has space")).toMatch(UUID_V4);
    expect(requestIdOf("x".repeat(129))).toMatch(UUID_V4);
  });
});
