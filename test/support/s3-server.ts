import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import S3rver from "s3rver";
import type { S3rverStore } from "s3rver";

/** s3rver's fixed credentials: it checks that a request names this access key, but not its signature (Ceph's gateway, `ceph-rgw.ts`, checks both). */
export const S3_CREDENTIALS = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" } as const;

/** A real S3-protocol server on a free port, with one bucket, its objects in a temp dir. */
export interface TestS3Server {
  /** `http://127.0.0.1:PORT` */
  endpoint: string;
  bucket: string;
  /** The `images` config section for an `s3://bucket/prefix` store on this server. */
  imagesConfig(prefix: string): {
    url: string;
    s3: {
      endpoint: string;
      region: string;
      forcePathStyle: true;
      accessKeyId: string;
      secretAccessKey: string;
    };
  };
  /**
   * Stops answering (connections refused, open ones cut) without losing the objects; `start`
   * brings it back.
   */
  stop(): Promise<void>;
  /** Answers again on the same port, with the same objects. */
  start(): Promise<void>;
  /** Stops it for good and deletes its objects. */
  close(): Promise<void>;
  /** Every request it received so far (method and path with query), oldest first. */
  readonly requests: ReadonlyArray<{ method: string; url: string }>;
}

/**
 * Starts s3rver (an S3 implementation on the file system, from npm) on
 * 127.0.0.1, path-style, with bucket `bucket` (default `images`).
 */
export async function startS3Server(bucket = "images"): Promise<TestS3Server> {
  const directory = await mkdtemp(join(tmpdir(), "s3rver-"));
  let port = 0;
  let server: S3rver | undefined;
  const requests: Array<{ method: string; url: string }> = [];
  const start = async () => {
    const next = new S3rver({
      port,
      address: "127.0.0.1",
      silent: true,
      directory,
      configureBuckets: [{ name: bucket }],
    });
    takeTurns(next.store);
    port = (await next.run()).port;
    next.httpServer?.on("request", (req: { method?: string; url?: string }) => {
      requests.push({ method: req.method ?? "", url: req.url ?? "" });
    });
    server = next;
  };
  await start();
  const endpoint = `http://127.0.0.1:${port}`;
  const stop = async () => {
    const running = server;
    server = undefined;
    // Gone at once, as a store that went away is: keep-alive connections too, idle or not.
    const closed = running?.close();
    running?.httpServer?.closeAllConnections();
    await closed;
  };
  return {
    endpoint,
    bucket,
    imagesConfig: (prefix) => ({
      url: `s3://${bucket}/${prefix}`,
      s3: { endpoint, region: "us-east-1", forcePathStyle: true, ...S3_CREDENTIALS },
    }),
    stop,
    requests,
    async start() {
      if (!server) await start();
    },
    async close() {
      await stop();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

/**
 * A put or a delete waits for the one before it at most this long: one whose client went away
 * (a store check cut off, a server stopped) may never settle in s3rver.
 */
const TURN_WAIT_MS = 1000;

/**
 * s3rver's delete removes the directories it left empty, and its put makes the directory then
 * opens the file in it with no listener for the open's error: a delete in one day's folder
 * (a replica's start-up check) between another put's two steps (the other replica's check)
 * throws ENOENT out of the test process. Puts and deletes here go one at a time.
 */
function takeTurns(store: S3rverStore): void {
  let last: Promise<unknown> = Promise.resolve();
  const inTurn =
    (step: (...args: unknown[]) => Promise<unknown>) =>
    (...args: unknown[]) => {
      const waited = new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, TURN_WAIT_MS);
        timer.unref();
        void last.finally(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      const run = waited.then(() => step(...args));
      last = run.catch(() => undefined);
      return run;
    };
  store.putObject = inTurn(store.putObject.bind(store));
  store.deleteObject = inTurn(store.deleteObject.bind(store));
}
