import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { createCredentialSealer, CredentialSealError } from "../../src/auth/credential-sealer.js";
import {
  forwardSecretFile,
  resolveForwardSecret as resolveSecret,
  type ResolveForwardSecretOptions,
} from "../../src/auth/resolve-forward-secret.js";
import { ConfigError } from "../../src/config/config-error.js";
import {
  FORWARD_SECRET_META_KEY,
  moveLegacyForwardSecret,
} from "../../src/tasks/legacy/legacy-forward-secret.js";

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

/**
 * Start-up's two steps on forward mode's secret: the upgrade step moves what an earlier
 * version kept in the task store (`meta`), then the secret is resolved.
 */
async function resolveForwardSecret(
  options: ResolveForwardSecretOptions & {
    meta: {
      getMeta(key: string): Promise<string | undefined>;
      deleteMeta(key: string): Promise<void>;
    };
  },
): Promise<string> {
  await moveLegacyForwardSecret({ ...options, legacy: options.meta });
  return resolveSecret(options);
}

describe("resolveForwardSecret", () => {
  /** A task store's meta, in memory, holding what an earlier version left in it. */
  const metaHolding = (kept?: string) => {
    const values = new Map<string, string>();
    if (kept) values.set(FORWARD_SECRET_META_KEY, kept);
    return {
      values,
      getMeta: async (key: string) => values.get(key),
      deleteMeta: async (key: string) => void values.delete(key),
    };
  };
  const logger = pino({ level: "silent" });

  it("uses auth.forward.secret when set, and deletes a copy an earlier version kept in the store", async () => {
    const meta = metaHolding(SECRET);
    const secret = await resolveForwardSecret({
      configured: SECRET,
      taskStore: {
        kind: "redis",
        url: "redis://127.0.0.1:6379",
        topology: { mode: "standalone", url: "redis://127.0.0.1:6379", tls: false },
      },
      meta,
      logger,
    });
    expect(secret).toBe(SECRET);
    expect(meta.values.size).toBe(0);
  });

  it("on SQLite, generates one into a 0600 file beside the database, never into the store, and reads it back", async () => {
    const dir = await mkdtemp(join(tmpdir(), "forward-secret-"));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const taskStore = { kind: "sqlite", file: join(dir, "tasks.db") } as const;
    const meta = metaHolding();
    const first = await resolveForwardSecret({ configured: undefined, taskStore, meta, logger });
    expect(first.length).toBeGreaterThanOrEqual(32);
    const file = join(dir, "tasks.db.forward-secret");
    expect(forwardSecretFile(taskStore)).toBe(file);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(meta.values.size).toBe(0);
    expect(await resolveForwardSecret({ configured: undefined, taskStore, meta, logger })).toBe(
      first,
    );
    // Seals and owner hashes made with it hold across a restart.
    const sealed = await sealerWith(first).seal(KEY, TASK);
    expect(await sealerWith(first).unseal(sealed, TASK)).toBe(KEY);
  });

  it("on SQLite, moves the secret an earlier version kept in the store to the file", async () => {
    const dir = await mkdtemp(join(tmpdir(), "forward-secret-"));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const taskStore = { kind: "sqlite", file: join(dir, "tasks.db") } as const;
    const meta = metaHolding(SECRET);
    expect(await resolveForwardSecret({ configured: undefined, taskStore, meta, logger })).toBe(
      SECRET,
    );
    expect((await readFile(join(dir, "tasks.db.forward-secret"), "utf8")).trim()).toBe(SECRET);
    expect(meta.values.size).toBe(0);
  });

  it("refuses a secret file that is too short, naming it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "forward-secret-"));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, "tasks.db.forward-secret"), "short\n", { mode: 0o600 });
    const error = await resolveForwardSecret({
      configured: undefined,
      taskStore: { kind: "sqlite", file: join(dir, "tasks.db") },
      meta: metaHolding(),
      logger,
    }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems[0]).toContain("tasks.db.forward-secret");
  });

  it("on memory://, makes one in memory and leaves the store alone", async () => {
    const meta = metaHolding();
    const secret = await resolveForwardSecret({
      configured: undefined,
      taskStore: { kind: "memory" },
      meta,
      logger,
    });
    expect(secret.length).toBeGreaterThanOrEqual(32);
    expect(meta.values.size).toBe(0);
  });
});
