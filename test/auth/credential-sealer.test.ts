import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createCredentialSealer, CredentialSealError } from "../../src/auth/credential-sealer.js";
import {
  createForwardSecretSource,
  createKeyHasher,
  FORWARD_SECRET_META_KEY,
} from "../../src/auth/forward-secret.js";
import { AppError } from "../../src/http/app-error.js";
import { createTaskStore } from "../../src/tasks/store/create-task-store.js";
import { testConfig } from "../support/start-test-app.js";

const SECRET = "sealer-test-secret-0123456789abcdef-0001";
const KEY = "sk-newapi-user-key-0123456789abcdef";
const TASK = "task_0123456789abcdefghijkl";

const sealerWith = (secret: string) => createCredentialSealer(async () => secret);

/** `sealed` with the first character of part `index` changed (it carries six full bits). */
function flip(sealed: string, index: number): string {
  const parts = sealed.split(".");
  const part = parts[index] as string;
  parts[index] = `${part[0] === "A" ? "B" : "A"}${part.slice(1)}`;
  return parts.join(".");
}

describe("createCredentialSealer", () => {
  it("round-trips a key, in a versioned form that does not contain it", async () => {
    const sealer = sealerWith(SECRET);
    const sealed = await sealer.seal(KEY, TASK);
    expect(sealed).toMatch(
      /^v1\.[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/,
    );
    expect(sealed).not.toContain(KEY);
    expect(sealed).not.toContain(Buffer.from(KEY).toString("base64url"));
    expect(await sealer.unseal(sealed, TASK)).toBe(KEY);
    // Another sealer on the same secret (another replica, a restart) opens it too.
    expect(await sealerWith(SECRET).unseal(sealed, TASK)).toBe(KEY);
  });

  it("uses a fresh IV for every seal", async () => {
    const sealer = sealerWith(SECRET);
    const seals = await Promise.all(Array.from({ length: 20 }, () => sealer.seal(KEY, TASK)));
    expect(new Set(seals).size).toBe(20);
    expect(new Set(seals.map((sealed) => sealed.split(".")[2])).size).toBe(20);
  });

  it("fails closed on any tampered part", async () => {
    const sealer = sealerWith(SECRET);
    const sealed = await sealer.seal(KEY, TASK);
    for (const index of [1, 2, 3, 4]) {
      await expect(sealer.unseal(flip(sealed, index), TASK)).rejects.toBeInstanceOf(
        CredentialSealError,
      );
    }
    await expect(sealer.unseal(sealed.replace(/^v1/, "v2"), TASK)).rejects.toBeInstanceOf(
      CredentialSealError,
    );
  });

  it("refuses a shortened tag, a missing part and values that are not sealed at all", async () => {
    const sealer = sealerWith(SECRET);
    const sealed = await sealer.seal(KEY, TASK);
    const parts = sealed.split(".");
    const shortTag = [...parts.slice(0, 4), (parts[4] as string).slice(0, 6)].join(".");
    for (const bad of [
      shortTag,
      parts.slice(0, 4).join("."),
      `${sealed}.extra`,
      "",
      KEY,
      "v1....",
      undefined as unknown as string,
    ]) {
      await expect(sealer.unseal(bad, TASK)).rejects.toBeInstanceOf(CredentialSealError);
    }
  });

  it("does not open with another secret", async () => {
    const sealed = await sealerWith(SECRET).seal(KEY, TASK);
    await expect(
      sealerWith("another-sealer-secret-0123456789abcdef").unseal(sealed, TASK),
    ).rejects.toThrow(/another secret/);
  });

  it("does not open for another context (a sealed key moved to another task)", async () => {
    const sealer = sealerWith(SECRET);
    const sealed = await sealer.seal(KEY, TASK);
    await expect(sealer.unseal(sealed, "task_someotherid0123456789")).rejects.toBeInstanceOf(
      CredentialSealError,
    );
  });

  it("round-trips keys of any length and characters", async () => {
    const sealer = sealerWith(SECRET);
    for (const key of ["k", "sk-" + "x".repeat(4000), "sk-ключ-🔑"]) {
      expect(await sealer.unseal(await sealer.seal(key, TASK), TASK)).toBe(key);
    }
  });
});

describe("createForwardSecretSource", () => {
  it("uses auth.forward.secret when set, without touching the store", async () => {
    let asked = 0;
    const source = createForwardSecretSource(SECRET, async () => {
      asked += 1;
      return "from-store";
    });
    expect(await source()).toBe(SECRET);
    expect(asked).toBe(0);
  });

  it("generates a secret once and keeps it in the store, so a restart seals and owns alike", async () => {
    const store = await createTaskStore(
      testConfig("http://127.0.0.1:9/v1"),
      pino({ level: "silent" }),
    );
    try {
      const meta = (key: string, create: () => string) => store.getOrSetMeta(key, create);
      const first = createForwardSecretSource(undefined, meta);
      const secret = await first();
      expect(secret.length).toBeGreaterThanOrEqual(32);
      expect(await first()).toBe(secret);
      expect(await store.getOrSetMeta(FORWARD_SECRET_META_KEY, () => "not used")).toBe(secret);

      // A second process on the same store: same secret, so same owner hash and open seals.
      const second = createForwardSecretSource(undefined, meta);
      const sealed = await createCredentialSealer(first).seal(KEY, TASK);
      expect(await createCredentialSealer(second).unseal(sealed, TASK)).toBe(KEY);
      expect(await createKeyHasher(second)(KEY)).toBe(await createKeyHasher(first)(KEY));
    } finally {
      await store.close();
    }
  });

  it("is store_unavailable while the store cannot be reached, and tries again next time", async () => {
    let calls = 0;
    const source = createForwardSecretSource(undefined, async (_key, create) => {
      calls += 1;
      if (calls === 1) throw new Error("connect ECONNREFUSED");
      return create();
    });
    const error = await source().catch((err: unknown) => err);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe("store_unavailable");
    expect(typeof (await source())).toBe("string");
    expect(calls).toBe(2);
  });
});

describe("createKeyHasher", () => {
  it("derives its key from the secret apart from the seal key: the hash is not an HMAC with the root", async () => {
    const hash = await createKeyHasher(async () => SECRET)(KEY);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    const { createHmac } = await import("node:crypto");
    expect(hash).not.toBe(createHmac("sha256", SECRET).update(KEY).digest("hex"));
  });
});
