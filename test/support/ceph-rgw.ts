import { randomBytes, randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { cephConf, cephKeyring } from "./ceph-config.js";
import {
  forgetDir,
  killDaemon,
  logTails,
  removeOnExit,
  runTool,
  startDaemon,
  type Daemon,
} from "./ceph-daemons.js";
import { freePort } from "./redis.js";

/** An S3 user's keys. */
export interface S3Keys {
  accessKeyId: string;
  secretAccessKey: string;
}

/** A one-node Ceph (mon, memstore OSD, RADOS Gateway) on 127.0.0.1, see {@link startCephRgw}. */
export interface CephRgw extends S3Keys {
  /** `http://127.0.0.1:PORT`: path-style S3 (the gateway knows no DNS name for buckets). */
  endpoint: string;
  /** The region to sign for; the gateway's zonegroup takes it. */
  region: string;
  /** A second user: keys that sign correctly but own nothing, for `AccessDenied`. */
  outsider: S3Keys;
  /** The temp dir with everything: ceph.conf, keyring, mon and osd data, logs (`log/`). */
  dir: string;
  /** How long start-up took, in milliseconds. */
  startupMs: number;
  /** Creates a bucket owned by the main user (with the S3 API, as a client would). */
  createBucket(name: string): Promise<void>;
  /**
   * Freezes the gateway (SIGSTOP): connections are accepted and never answered. Resolves once
   * every thread of it is stopped (a signal reaches each thread on its own, and a request sent
   * at once was answered in CI).
   */
  pause(): Promise<void>;
  /** Lets a paused gateway go on (SIGCONT). */
  resume(): void;
  /** Ends the gateway: connections are refused until {@link CephRgw.startGateway}. Data is kept. */
  stopGateway(): Promise<void>;
  /** Starts the gateway again on the same port; resolves when it answers. */
  startGateway(): Promise<void>;
  /** Kills every daemon it started and deletes the temp dir. Safe to call twice. */
  stop(): Promise<void>;
}

/** How long each start-up step may take before start-up fails. */
const STEP_TIMEOUT_MS = 30_000;

const REGION = "us-east-1";

/** What the steps share while the cluster starts. */
interface Cluster {
  dir: string;
  conf: string;
  rgwPort: number;
  daemons: Map<string, Daemon>;
}

/**
 * Starts a one-node Ceph with a RADOS Gateway on free ports of 127.0.0.1,
 * everything in a new temp dir, no systemd: one mon, one OSD keeping its
 * objects in memory (memstore), one gateway (beast), an S3 user with keys
 * and a second user without rights. Needs Debian's ceph-mon, ceph-osd and
 * radosgw (`scripts/ensure-ceph.sh` installs them). Call `stop()` in
 * `afterAll`; the daemons are also killed when the test process exits.
 */
export async function startCephRgw(): Promise<CephRgw> {
  await checkInstalled();
  const started = Date.now();
  const dir = await mkdtemp(join(tmpdir(), "ceph-rgw-"));
  removeOnExit(dir);
  const cluster: Cluster = {
    dir,
    conf: join(dir, "ceph.conf"),
    rgwPort: 0,
    daemons: new Map(),
  };
  const stopAll = async () => {
    await Promise.all([...cluster.daemons.values()].map(killDaemon));
    cluster.daemons.clear();
  };
  try {
    const users = await bootstrap(cluster);
    return handle(cluster, users, Date.now() - started, stopAll);
  } catch (err) {
    // The gateway and the admin tool first: they are the last steps, so most often the one that failed.
    const tails = await logTails(dir, ["client.rgw.a", "client.admin", "osd.0", "mon.a"]);
    await stopAll();
    await rm(dir, { recursive: true, force: true });
    forgetDir(dir);
    throw new Error(`Ceph did not start: ${(err as Error).message}\n${tails}`, { cause: err });
  }
}

/** Fails with the way out when Debian's Ceph packages are not installed. */
async function checkInstalled(): Promise<void> {
  const tools = "ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph setpriv";
  const missing = await runTool(tmpdir(), "/bin/sh", [
    "-c",
    `for t in ${tools}; do command -v "$t" >/dev/null || echo "$t"; done`,
  ]);
  if (missing.trim()) {
    throw new Error(
      `Ceph is not installed (missing: ${missing.trim().split("\n").join(", ")}): run \`bash scripts/ensure-ceph.sh\` as root`,
    );
  }
}

/** The cluster's start-up, step by step; resolves the two users' keys. */
async function bootstrap(cluster: Cluster): Promise<{ main: S3Keys; outsider: S3Keys }> {
  const { dir, conf } = cluster;
  for (const sub of ["mon/a", "osd/0", "run", "log", "rgw", "crash"]) {
    await mkdir(join(dir, sub), { recursive: true });
  }
  const fsid = randomUUID();
  const monPort = await freePort();
  const writeConf = async () => {
    // A port found free is not held: the next one found could be the same.
    do cluster.rgwPort = await freePort();
    while (cluster.rgwPort === monPort);
    // Written whole, then renamed: a `radosgw-admin` may be reading it.
    await writeFile(`${conf}.new`, cephConf({ fsid, dir, monPort, rgwPort: cluster.rgwPort }));
    await rename(`${conf}.new`, conf);
  };
  await writeConf();
  await writeFile(join(dir, "keyring"), cephKeyring(), { mode: 0o600 });

  const monmap = join(dir, "monmap");
  await runTool(dir, "monmaptool", [
    "--create",
    "--fsid",
    fsid,
    "--addv",
    "a",
    `[v2:127.0.0.1:${monPort}]`,
    monmap,
  ]);
  // The keyring's entities (admin, osd.0, the gateway) become the mon's auth database.
  await runTool(dir, "ceph-mon", [
    "-c",
    conf,
    "--mkfs",
    "-i",
    "a",
    "--monmap",
    monmap,
    "--keyring",
    join(dir, "keyring"),
  ]);
  cluster.daemons.set("mon", startDaemon(dir, "mon.a", "ceph-mon", ["-c", conf, "-i", "a", "-f"]));

  const osdUuid = randomUUID();
  await Promise.all([
    runTool(dir, "ceph", ["-c", conf, "--connect-timeout", "30", "osd", "new", osdUuid, "0"]),
    runTool(dir, "ceph-osd", ["-c", conf, "-i", "0", "--mkfs", "--osd-uuid", osdUuid]),
  ]);
  cluster.daemons.set("osd", startDaemon(dir, "osd.0", "ceph-osd", ["-c", conf, "-i", "0", "-f"]));

  // The first user creates the gateway's pools (it waits for the OSD to be up); the
  // gateway and the second user need them.
  const main = await createUser(cluster, "tester");
  const [outsider] = await Promise.all([
    createUser(cluster, "outsider"),
    startGatewayOnFreePort(cluster, writeConf),
  ]);
  return { main, outsider };
}

/**
 * {@link startGateway}, on another port when the one chosen was taken meanwhile: it was found
 * free seconds before radosgw binds it (the mon and the OSD start first), and another test's
 * server may have bound it since (seen once: "failed to bind address ...: Address already in
 * use"). `newPort` chooses another and writes it to the configuration radosgw reads.
 */
async function startGatewayOnFreePort(
  cluster: Cluster,
  newPort: () => Promise<void>,
): Promise<void> {
  const out = join(cluster.dir, "log", "client.rgw.a.out");
  for (let attempt = 1; ; attempt += 1) {
    const before = (await readFile(out, "utf8").catch(() => "")).length;
    try {
      return await startGateway(cluster);
    } catch (err) {
      const said = (await readFile(out, "utf8").catch(() => "")).slice(before);
      if (attempt === 3 || !/failed to bind address .*Address already in use/.test(said)) throw err;
      cluster.daemons.delete("rgw");
      await newPort();
    }
  }
}

/** Creates an S3 user with new keys (`radosgw-admin user create`). */
async function createUser(cluster: Cluster, uid: string): Promise<S3Keys> {
  const keys = {
    accessKeyId: randomBytes(10).toString("hex").toUpperCase(),
    secretAccessKey: randomBytes(30).toString("base64url"),
  };
  await runTool(
    cluster.dir,
    "radosgw-admin",
    [
      "-c",
      cluster.conf,
      "user",
      "create",
      "--uid",
      uid,
      "--display-name",
      uid,
      "--access-key",
      keys.accessKeyId,
      "--secret-key",
      keys.secretAccessKey,
    ],
    STEP_TIMEOUT_MS,
  );
  return keys;
}

/** Starts radosgw and waits until it answers HTTP (or fails if it exits first). */
async function startGateway(cluster: Cluster): Promise<void> {
  const rgw = startDaemon(cluster.dir, "client.rgw.a", "radosgw", [
    "-c",
    cluster.conf,
    "-n",
    "client.rgw.a",
    "-f",
  ]);
  cluster.daemons.set("rgw", rgw);
  const endpoint = `http://127.0.0.1:${cluster.rgwPort}/`;
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  let gone = false;
  void rgw.exited.then(() => {
    gone = true;
  });
  while (!gone) {
    try {
      await fetch(endpoint, { signal: AbortSignal.timeout(1_000) });
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`radosgw did not answer on ${endpoint}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  throw new Error("radosgw exited during start-up");
}

/** What {@link startCephRgw} hands the test. */
function handle(
  cluster: Cluster,
  users: { main: S3Keys; outsider: S3Keys },
  startupMs: number,
  stopAll: () => Promise<void>,
): CephRgw {
  const endpoint = `http://127.0.0.1:${cluster.rgwPort}`;
  const client = new S3Client({
    endpoint,
    region: REGION,
    forcePathStyle: true,
    credentials: { ...users.main },
  });
  const gateway = () => {
    const rgw = cluster.daemons.get("rgw");
    if (!rgw) throw new Error("the gateway is stopped");
    return rgw;
  };
  let stopped: Promise<void> | undefined;
  return {
    endpoint,
    region: REGION,
    ...users.main,
    outsider: users.outsider,
    dir: cluster.dir,
    startupMs,
    async createBucket(name) {
      await client.send(new CreateBucketCommand({ Bucket: name }));
    },
    async pause() {
      const { child } = gateway();
      child.kill("SIGSTOP");
      await stoppedWhole(child.pid);
    },
    resume: () => void gateway().child.kill("SIGCONT"),
    async stopGateway() {
      const rgw = cluster.daemons.get("rgw");
      cluster.daemons.delete("rgw");
      if (rgw) await killDaemon(rgw);
    },
    async startGateway() {
      if (!cluster.daemons.has("rgw")) await startGateway(cluster);
    },
    stop() {
      stopped ??= (async () => {
        client.destroy();
        await stopAll();
        await rm(cluster.dir, { recursive: true, force: true });
        forgetDir(cluster.dir);
      })();
      return stopped;
    },
  };
}

/** Resolves once every thread of `pid` is stopped (state T in /proc), within 5 s. */
async function stoppedWhole(pid: number | undefined): Promise<void> {
  if (pid === undefined) throw new Error("the gateway has no process");
  const states = async () => {
    const threads = await readdir(`/proc/${pid}/task`);
    return Promise.all(
      threads.map(async (tid) => {
        const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, "utf8");
        // The state follows the command name, which is in parentheses and may hold spaces.
        return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      }),
    );
  };
  for (const until = Date.now() + 5_000; Date.now() < until;) {
    if ((await states()).every((state) => state === "T" || state === "t")) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`the gateway (pid ${pid}) did not stop within 5 s of SIGSTOP`);
}
