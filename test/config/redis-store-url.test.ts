import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import { parseConfig } from "../../src/config/load-config.js";
import { redactUrl } from "../../src/logging/redact-url.js";

const BASE = {
  groups: { default: { models: ["*"] } },
  channels: [{ name: "one", baseUrl: "http://127.0.0.1:9000/v1", models: ["gpt-4o-mini"] }],
};

/** The deployment a `store` section describes. */
function taskStoreOf(store: Record<string, unknown>) {
  return parseConfig({ ...BASE, store }).deployment.taskStore;
}

/** The problems a `store` section has, one line each as start-up prints them. */
function problemsOf(store: Record<string, unknown>, extra: Record<string, unknown> = {}): string[] {
  try {
    parseConfig({ ...BASE, ...extra, store });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error("the store section was accepted");
}

describe("store.url for Redis Sentinel and Redis Cluster", () => {
  it("reads redis+sentinel:// as the spec writes it: password, sentinels, master name, db", () => {
    expect(
      taskStoreOf({
        url: "redis+sentinel://:s3cret@10.0.0.1:26379,sentinel-2.internal:26380/mymaster/2",
        sentinelPassword: "sentinel-secret",
      }),
    ).toEqual({
      kind: "redis",
      url: "redis+sentinel://:s3cret@10.0.0.1:26379,sentinel-2.internal:26380/mymaster/2",
      topology: {
        mode: "sentinel",
        sentinels: [
          { host: "10.0.0.1", port: 26379 },
          { host: "sentinel-2.internal", port: 26380 },
        ],
        masterName: "mymaster",
        db: 2,
        tls: false,
        password: "s3cret",
      },
    });
    expect(taskStoreOf({ url: "rediss+sentinel://h:26379/cache" })).toMatchObject({
      topology: { mode: "sentinel", masterName: "cache", db: 0, tls: true },
    });
  });

  it("reads redis+cluster:// with any nodes, and rediss+cluster:// for TLS", () => {
    expect(taskStoreOf({ url: "redis+cluster://:pw@a:7000,b:7001,[::1]:7002" })).toMatchObject({
      topology: {
        mode: "cluster",
        nodes: [
          { host: "a", port: 7000 },
          { host: "b", port: 7001 },
          { host: "::1", port: 7002 },
        ],
        tls: false,
        password: "pw",
      },
    });
    expect(taskStoreOf({ url: "rediss+cluster://user:pw@a:6379" })).toMatchObject({
      topology: { mode: "cluster", tls: true, username: "user", password: "pw" },
    });
    expect(taskStoreOf({ url: "redis://127.0.0.1:6379/0" })).toMatchObject({
      topology: { mode: "standalone", tls: false },
    });
  });

  it("is shared by replicas, and forward mode needs its secret on every Redis form", () => {
    const forward = {
      auth: { forward: { channel: "one", baseUrl: "http://127.0.0.1:9000/v1" } },
      channels: [{ name: "one", baseUrl: "http://127.0.0.1:9000/v1", models: ["gpt-4o-mini"] }],
    };
    for (const url of ["redis+sentinel://h:26379/m", "redis+cluster://h:7000"]) {
      expect(parseConfig({ ...BASE, store: { url } }).deployment.shared).toBe(true);
      expect(problemsOf({ url }, forward).join("\n")).toMatch(/^auth\.forward\.secret: required/m);
    }
  });

  it("refuses forms that cannot work, naming store.url and the reason", () => {
    expect(problemsOf({ url: "redis+sentinel://h:26379" })).toEqual([
      "store.url: must name the master: redis+sentinel://[:password@]host:port[,host:port...]/<master name>[/<db>]",
    ]);
    expect(problemsOf({ url: "redis+sentinel://h/mymaster" })).toEqual([
      'store.url: "h" is not host:port (every node needs its port)',
    ]);
    expect(problemsOf({ url: "redis+sentinel://h:1/m/x" })).toEqual([
      'store.url: the database must be a number, not "x"',
    ]);
    expect(problemsOf({ url: "redis+cluster://a:7000,b:99999" })).toEqual([
      'store.url: "b:99999" is not host:port (every node needs its port)',
    ]);
    expect(problemsOf({ url: "redis+cluster://a:7000/0" })[0]).toMatch(
      /^store\.url: a cluster has no master name or database/,
    );
    expect(problemsOf({ url: "redis+mesh://a:7000" })[0]).toMatch(/^store\.url: must start with/);
  });

  it("takes store.minReplicas 0 to 16 (default 0) and a sentinel password", () => {
    const parse = (store: Record<string, unknown>) => parseConfig({ ...BASE, store }).store;
    expect(parse({ url: "redis://h:6379" }).minReplicas).toBe(0);
    expect(parse({ url: "redis://h:6379", minReplicas: 2 }).minReplicas).toBe(2);
    expect(problemsOf({ url: "redis://h:6379", minReplicas: -1 })).toEqual([
      "store.minReplicas: must be 0 or more",
    ]);
    expect(problemsOf({ url: "redis://h:6379", minReplicas: 1.5 })).toEqual([
      "store.minReplicas: must be a whole number",
    ]);
    expect(problemsOf({ url: "redis://h:6379", sentinelPassword: "" })).toEqual([
      "store.sentinelPassword: must not be empty",
    ]);
  });

  it("never shows a password of the several-host forms", () => {
    expect(redactUrl("redis+sentinel://:s3cret@h1:26379,h2:26379/mymaster")).toBe(
      "redis+sentinel://:***@h1:26379,h2:26379/mymaster",
    );
    expect(redactUrl("rediss+cluster://admin:s3cret@a:7000,b:7000")).toBe(
      "rediss+cluster://admin:***@a:7000,b:7000",
    );
    expect(redactUrl("redis+cluster://token@a:7000")).toBe("redis+cluster://***@a:7000");
    expect(redactUrl("redis+cluster://a:7000,b:7000")).toBe("redis+cluster://a:7000,b:7000");
  });
});
