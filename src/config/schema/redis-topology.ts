/** A Redis node's address. */
export interface RedisNode {
  host: string;
  port: number;
}

/**
 * The Redis deployment `store.url` names, parsed once: one server
 * (`redis://`), a Sentinel set (`redis+sentinel://`) or a Redis Cluster
 * (`redis+cluster://`); `rediss` for TLS in each form.
 */
export type RedisTopology =
  /** `redis://[user:password@]host:port[/db]`: one server (node-redis's URL form, kept as it is). */
  | { mode: "standalone"; url: string; tls: boolean }
  /** `redis+sentinel://[:password@]host:port[,host:port...]/<master name>[/<db>]`. */
  | {
      mode: "sentinel";
      /** The sentinels asked where the master is. */
      sentinels: RedisNode[];
      masterName: string;
      db: number;
      tls: boolean;
      username?: string;
      /** The Redis servers' password (the sentinels' own is `store.sentinelPassword`). */
      password?: string;
    }
  /** `redis+cluster://[:password@]host:port[,host:port...]`: any nodes of the cluster. */
  | {
      mode: "cluster";
      nodes: RedisNode[];
      tls: boolean;
      username?: string;
      password?: string;
    };

const MULTI_HOST = /^(rediss?)\+(sentinel|cluster):\/\/(?:([^@/]*)@)?([^/?#]+)(\/[^?#]*)?$/;

/**
 * Parses a Redis `store.url`; a string is the reason it is not one (for the
 * config error line, which names the field).
 */
export function parseRedisTopology(url: string): RedisTopology | string {
  if (/^rediss?:\/\//.test(url)) {
    try {
      new URL(url);
    } catch {
      return "must be a URL: redis://[:password@]host:port[/db]";
    }
    return { mode: "standalone", url, tls: url.startsWith("rediss:") };
  }
  const match = MULTI_HOST.exec(url);
  if (!match) {
    return url.includes("+cluster")
      ? "must be redis+cluster://[:password@]host:port[,host:port...]"
      : "must be redis+sentinel://[:password@]host:port[,host:port...]/<master name>[/<db>]";
  }
  const [, scheme, mode, auth, hostList, path = ""] = match;
  const nodes = parseNodes(hostList!);
  if (typeof nodes === "string") return nodes;
  const credentials = parseCredentials(auth);
  const tls = scheme === "rediss";
  const segments = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (mode === "cluster") {
    if (segments.length > 0) {
      return "a cluster has no master name or database: redis+cluster://[:password@]host:port[,host:port...]";
    }
    return { mode: "cluster", nodes, tls, ...credentials };
  }
  const [masterName, dbText, ...rest] = segments;
  if (!masterName || rest.length > 0) {
    return "must name the master: redis+sentinel://[:password@]host:port[,host:port...]/<master name>[/<db>]";
  }
  const db = dbText === undefined ? 0 : Number(dbText);
  if (!Number.isInteger(db) || db < 0 || !/^\d+$/.test(dbText ?? "0")) {
    return `the database must be a number, not "${dbText}"`;
  }
  return { mode: "sentinel", sentinels: nodes, masterName, db, tls, ...credentials };
}

function parseNodes(list: string): RedisNode[] | string {
  const nodes: RedisNode[] = [];
  for (const item of list.split(",")) {
    const match = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(item.trim());
    const port = Number(match?.[2]);
    if (!match || port < 1 || port > 65535) {
      return `"${item}" is not host:port (every node needs its port)`;
    }
    nodes.push({ host: match[1]!.replace(/^\[|\]$/g, ""), port });
  }
  return nodes;
}

function parseCredentials(auth: string | undefined): { username?: string; password?: string } {
  if (!auth) return {};
  const colon = auth.indexOf(":");
  const username = decodeURIComponent(colon < 0 ? auth : auth.slice(0, colon));
  const password = colon < 0 ? undefined : decodeURIComponent(auth.slice(colon + 1));
  // `token@host` alone: the one credential is the password (as `redis://` providers use it).
  if (password === undefined) return username ? { password: username } : {};
  return { ...(username ? { username } : {}), ...(password ? { password } : {}) };
}
