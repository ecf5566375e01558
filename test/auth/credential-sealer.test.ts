import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { createCredentialSealer, CredentialSealError } from "../../src/auth/credential-sealer.js";
import {
  fileForwardSecretHome,
  processForwardSecretHome,
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

const logger = pino({ level: "silent" });

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
  await moveLegacyForwardSecret({ ...options, legacy: options.meta, logger });
  return resolveSecret(options);
}

/** The home the SQLite backend gives a database in `dir`: a file of its own beside it. */
const homeBeside = (dir: string) =>
  fileForwardSecretHome(join(dir, "tasks.db.forward-secret"), logger);

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
  const tempDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), "forward-secret-"));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    return dir;
  };

  it("uses auth.forward.secret when set, and deletes a copy an earlier version kept in the store", async () => {
    const meta = metaHolding(SECRET);
    // Redis keeps no secret of its own: the configured one is all there is.
    const secret = await resolveForwardSecret({ configured: SECRET, home: undefined, meta });
    expect(secret).toBe(SECRET);
    expect(meta.values.size).toBe(0);
  });

  it("refuses to make one where the backend cannot keep it (a shared store)", async () => {
    const error = await resolveSecret({ configured: undefined, home: undefined }).catch(
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems[0]).toMatch(/^auth\.forward\.secret: required/);
  });

  it("in a file home, generates one into a 0600 file, never into the store, and reads it back", async () => {
    const dir = await tempDir();
    const meta = metaHolding();
    const first = await resolveForwardSecret({
      configured: undefined,
      home: homeBeside(dir),
      meta,
    });
    expect(first.length).toBeGreaterThanOrEqual(32);
    const file = join(dir, "tasks.db.forward-secret");
    expect((await readFile(file, "utf8")).trim()).toBe(first);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(meta.values.size).toBe(0);
    expect(await resolveForwardSecret({ configured: undefined, home: homeBeside(dir), meta })).toBe(
      first,
    );
    // Seals and owner hashes made with it hold across a restart.
    const sealed = await sealerWith(first).seal(KEY, TASK);
    expect(await sealerWith(first).unseal(sealed, TASK)).toBe(KEY);
  });

  it("in a file home, moves the secret an earlier version kept in the store to the file", async () => {
    const dir = await tempDir();
    const meta = metaHolding(SECRET);
    expect(await resolveForwardSecret({ configured: undefined, home: homeBeside(dir), meta })).toBe(
      SECRET,
    );
    expect((await readFile(join(dir, "tasks.db.forward-secret"), "utf8")).trim()).toBe(SECRET);
    expect(meta.values.size).toBe(0);
  });

  it("refuses a secret file that is too short, naming it", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, "tasks.db.forward-secret"), "short\n", { mode: 0o600 });
    const error = await resolveForwardSecret({
      configured: undefined,
      home: homeBeside(dir),
      meta: metaHolding(),
    }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems[0]).toContain("tasks.db.forward-secret");
  });

  it("in this process's memory (memory://), makes a new one each start and leaves the store alone", async () => {
    const meta = metaHolding();
    const options = { configured: undefined, meta };
    const secret = await resolveForwardSecret({ ...options, home: processForwardSecretHome() });
    expect(secret.length).toBeGreaterThanOrEqual(32);
    expect(meta.values.size).toBe(0);
    const next = await resolveForwardSecret({ ...options, home: processForwardSecretHome() });
    expect(next).not.toBe(secret);
  });
});
