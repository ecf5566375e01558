import { slow } from "../support/time-factor.js";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCephRgw, type CephRgw } from "../support/ceph-rgw.js";
import { REDIS_URL, deleteKeys, freePort, uniquePrefix } from "../support/redis.js";
import { listeningUrlIn, serve, spawnServe, writeConfig } from "../support/serve-process.js";
import { TEST_KEYS } from "../support/start-test-app.js";

/*
 * Start-up checks the image store before it listens, as an operator sees it:
 * the built bin on a real Redis, its images on Ceph's RADOS Gateway (a real
 * S3 that checks signatures and rights). A refusal that cannot heal exits 2
 * at once with one line naming the field and the gateway's own code; an
 * endpoint that does not answer is waited for `images.connectTimeoutSec`,
 * then exit 2.
 */

let rgw: CephRgw;
let bucket: string;
let dir: string;
const prefixes: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "image-store-startup-"));
  rgw = await startCephRgw();
  bucket = `startup-${randomBytes(4).toString("hex")}`;
  await rgw.createBucket(bucket);
}, slow(60_000));
afterAll(async () => {
  await rgw?.stop();
  for (const prefix of prefixes) await deleteKeys(prefix).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

interface S3Settings {
  bucket?: string;
  endpoint?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
}

/** A Redis deployment whose images go to the gateway, as `settings` say. */
async function configFile(settings: S3Settings = {}, connectTimeoutSec = 10): Promise<string> {
  const prefix = uniquePrefix("img-startup");
  prefixes.push(prefix);
  return writeConfig(dir, prefix, {
    server: { port: 0, host: "127.0.0.1" },
    store: { url: REDIS_URL, prefix },
    auth: { keys: [{ key: TEST_KEYS.default, group: "default" }] },
    groups: { default: { models: ["gpt-image-*"] } },
    channels: [{ name: "demo", type: "demo", models: ["gpt-image-1"] }],
    images: {
      url: `s3://${settings.bucket ?? bucket}/images`,
      connectTimeoutSec,
      s3: {
        endpoint: settings.endpoint ?? rgw.endpoint,
        region: rgw.region,
        forcePathStyle: true,
        accessKeyId: settings.accessKeyId ?? rgw.accessKeyId,
        secretAccessKey: settings.secretAccessKey ?? rgw.secretAccessKey,
      },
    },
  });
}

/** Runs `serve` until it exits; resolves its code, its stderr lines and how long it took. */
async function refused(file: string) {
  const started = Date.now();
  const run = spawnServe(file, dir);
  const code = await run.exited;
  const lines = run.stderr().split("\n").filter(Boolean);
  return { code, lines, ms: Date.now() - started, stdout: run.stdout() };
}

describe("start-up's image store check (Ceph RGW, Redis)", () => {
  it("starts with the right keys and a bucket that exists", async () => {
    const served = await serve(await configFile(), dir);
    expect(listeningUrlIn(served.stdout())).toBe(served.url);
    served.child.kill("SIGTERM");
    // Twice (loaded CIs) it ended by the signal instead of 0: the bin printed its banner before
    // it listened for signals. It now listens first; what it printed would tell if it came back.
    const code = await served.exited;
    expect(code, `stdout:\n${served.stdout()}\nstderr:\n${served.stderr()}`).toBe(0);
  });

  it(
    "exits 2 on each refusal that cannot heal, with the field and the gateway's own code",
    async () => {
      const where = (name: string) => `s3://${name}/images at ${rgw.endpoint}`;
      const missing = `missing-${randomBytes(4).toString("hex")}`;
      const cases: Array<[S3Settings, string]> = [
        [
          { secretAccessKey: `wrong${rgw.secretAccessKey}` },
          `images.s3.secretAccessKey: the store refused the request's signature: the secret does not belong to the key (SignatureDoesNotMatch, on PutObject, ${where(bucket)})`,
        ],
        [
          { accessKeyId: "NOSUCHKEY00000000000" },
          `images.s3.accessKeyId: the store knows no such access key (InvalidAccessKeyId, on PutObject, ${where(bucket)})`,
        ],
        [
          { ...rgw.outsider },
          `images.s3.accessKeyId: the key has no right to this: it needs s3:PutObject, s3:GetObject, s3:DeleteObject and s3:ListBucket on the bucket and prefix (AccessDenied, on PutObject, ${where(bucket)})`,
        ],
        [
          { bucket: missing },
          `images.url: the bucket does not exist (NoSuchBucket, on PutObject, ${where(missing)})`,
        ],
      ];
      for (const [settings, line] of cases) {
        // A minute's wait for a store that does not answer: far from what a refusal takes.
        const result = await refused(await configFile(settings, 60));
        expect(result.code, result.lines.join("\n")).toBe(2);
        expect(result.lines).toEqual([line]);
        // At once: a refusal is not waited for (a loaded CI took 9.6 s to start and refuse).
        expect(result.ms).toBeLessThan(30_000);
        expect(result.stdout).not.toContain("listening on");
      }
    },
    slow(90_000),
  );

  it(
    "waits images.connectTimeoutSec for an endpoint nothing listens on, then exits 2",
    async () => {
      const closed = `http://127.0.0.1:${await freePort()}`;
      // 5 s: a loaded CI once spent 2 s before the first refused connection was seen.
      const result = await refused(await configFile({ endpoint: closed }, 5));
      expect(result.code).toBe(2);
      expect(result.lines).toEqual([
        `images.s3.endpoint: the image store did not answer within images.connectTimeoutSec (5 s) (ECONNREFUSED, on HeadBucket, s3://${bucket}/images at ${closed})`,
      ]);
      expect(result.ms).toBeGreaterThanOrEqual(4_500);
    },
    slow(30_000),
  );

  it(
    "waits for a gateway that accepts connections and never answers, then exits 2",
    async () => {
      await rgw.pause();
      try {
        const result = await refused(await configFile({}, 2));
        expect(result.code).toBe(2);
        expect(result.lines).toHaveLength(1);
        expect(result.lines[0]).toMatch(
          /^images\.s3\.endpoint: the image store did not answer within images\.connectTimeoutSec \(2 s\) \(timeout, on /,
        );
      } finally {
        rgw.resume();
      }
    },
    slow(30_000),
  );
});

describe("start-up's image store check (a directory)", () => {
  it("exits 2 when images.url is a directory that cannot be made, naming the field and the code", async () => {
    const file = join(dir, "a-file");
    await writeFile(file, "not a directory");
    const config = await writeConfig(dir, `dir-${randomBytes(3).toString("hex")}`, {
      server: { port: 0, host: "127.0.0.1" },
      store: { url: "memory://" },
      auth: { keys: [{ key: TEST_KEYS.default, group: "default" }] },
      groups: { default: { models: ["gpt-image-*"] } },
      channels: [{ name: "demo", type: "demo", models: ["gpt-image-1"] }],
      images: { url: `file://${file}/images` },
    });
    const result = await refused(config);
    expect(result.code).toBe(2);
    expect(result.lines).toHaveLength(1);
    expect(result.lines[0]).toMatch(
      new RegExp(`^images\\.url: .* \\((ENOTDIR|EEXIST), on write, file://${file}/images\\)$`),
    );
  });
});
