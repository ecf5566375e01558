import { randomBytes } from "node:crypto";
import { join } from "node:path";

/*
 * The files a one-node Ceph test cluster starts from: ceph.conf and the one
 * keyring every daemon and client reads. Written by hand rather than with
 * ceph-authtool, which would cost a process start per key.
 */

/** The cephx entities of the test cluster, with the capabilities each is created with. */
export const CEPH_ENTITIES = {
  "mon.": { mon: "allow *" },
  "client.admin": { mon: "allow *", osd: "allow *", mgr: "allow *" },
  "osd.0": { mon: "allow profile osd", osd: "allow *", mgr: "allow profile osd" },
  "client.rgw.a": { mon: "allow rw", osd: "allow rwx", mgr: "allow rw" },
} as const;

/**
 * A new cephx secret as Ceph encodes it (base64 of CryptoKey: u16 type 1 =
 * AES, the creation time as u32 seconds and u32 nanoseconds, u16 length 16,
 * the 16 secret bytes), the same as `ceph-authtool --gen-print-key` prints.
 */
export function cephSecret(now = new Date()): string {
  const key = Buffer.alloc(2 + 8 + 2 + 16);
  key.writeUInt16LE(1, 0);
  key.writeUInt32LE(Math.floor(now.getTime() / 1000), 2);
  key.writeUInt32LE((now.getTime() % 1000) * 1_000_000, 6);
  key.writeUInt16LE(16, 10);
  randomBytes(16).copy(key, 12);
  return key.toString("base64");
}

/** The keyring of every entity in {@link CEPH_ENTITIES}, each with a new secret. */
export function cephKeyring(): string {
  return Object.entries(CEPH_ENTITIES)
    .map(([name, caps]) => {
      const capLines = Object.entries(caps).map(([kind, cap]) => `\tcaps ${kind} = "${cap}"\n`);
      return `[${name}]\n\tkey = ${cephSecret()}\n${capLines.join("")}`;
    })
    .join("");
}

/** What {@link cephConf} needs to know. */
export interface CephConfOptions {
  fsid: string;
  /** Everything lives under it: mon and osd data, keyring, sockets, logs. */
  dir: string;
  monPort: number;
  rgwPort: number;
}

/**
 * ceph.conf for one mon, one memstore OSD and one gateway, all on 127.0.0.1,
 * msgr2 only. Each setting below is there for a test machine (2 cores, small
 * memory, no second disk, start-up in seconds) and would be wrong in production.
 */
export function cephConf({ fsid, dir, monPort, rgwPort }: CephConfOptions): string {
  const settings: Record<string, Record<string, string | number | boolean>> = {
    global: {
      fsid,
      "mon host": `v2:127.0.0.1:${monPort}`,
      // Both, or the OSD's cluster and back heartbeat ports listen on every interface.
      "public addr": "127.0.0.1",
      "cluster addr": "127.0.0.1",
      "ms bind msgr1": false,
      "ms bind ipv6": false,
      "auth cluster required": "cephx",
      "auth service required": "cephx",
      "auth client required": "cephx",
      keyring: join(dir, "keyring"),
      "run dir": join(dir, "run"),
      "admin socket": join(dir, "run", "$name.asok"),
      "log file": join(dir, "log", "$name.log"),
      "pid file": join(dir, "run", "$name.pid"),
      "crash dir": join(dir, "crash"),
      // Clients give up rather than hunt for a mon for five minutes.
      "client mount timeout": 30,
      "rados mon op timeout": 30,
      "rados osd op timeout": 30,
      // One OSD: pools of one copy, placed on OSDs rather than hosts.
      "osd pool default size": 1,
      "osd pool default min size": 1,
      "mon allow pool size one": true,
      "mon warn on pool no redundancy": false,
      "osd crush chooseleaf type": 0,
      // RGW creates about eight pools: few PGs each, and no mgr to autoscale them.
      "osd pool default pg num": 8,
      "osd pool default pgp num": 8,
      "osd pool default pg autoscale mode": "off",
      "mon max pg per osd": 1000,
      // A full test disk is no reason for the mon to stop.
      "mon data avail warn": 1,
      "mon data avail crit": 0,
      // Each pool RGW creates is a few map changes; the default one-second proposal
      // interval alone made start-up take ten seconds.
      "paxos propose interval": 0.01,
      "paxos min wait": 0.001,
      "mon warn on insecure global id reclaim allowed": false,
      // A client whose first request finds the OSD not yet up looks again at this
      // interval (default 5 s, the slowest step of start-up otherwise).
      "objecter tick interval": 0.2,
    },
    mon: { "mon data": join(dir, "mon", "$id") },
    osd: {
      "osd data": join(dir, "osd", "$id"),
      // Objects in memory: no disk to prepare; 256 MiB is room for the tests' images.
      "osd objectstore": "memstore",
      "memstore device bytes": 256 * 1024 * 1024,
      // The smallest target Ceph accepts; memstore has no cache for it to size.
      "osd memory target": 896 * 1024 * 1024,
    },
    "client.rgw.a": {
      "rgw frontends": `beast endpoint=127.0.0.1:${rgwPort}`,
      "rgw data": join(dir, "rgw"),
      "rgw thread pool size": 32,
    },
  };
  return Object.entries(settings)
    .map(([section, values]) => {
      const lines = Object.entries(values).map(([name, value]) => `${name} = ${value}\n`);
      return `[${section}]\n${lines.join("")}`;
    })
    .join("\n");
}
