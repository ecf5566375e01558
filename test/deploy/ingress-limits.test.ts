import { readFileSync } from "node:fs";
import { join } from "node:path";
import { isMap, isPair, isScalar, parseDocument, parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import type { Config } from "../../src/config/config-schema.js";
import { parseConfig } from "../../src/config/load-config.js";
import { KUSTOMIZE_ROOT, OVERLAYS, secretFilledIn } from "./kustomize.js";

/*
 * The ingress-nginx annotations and the HTTPRoute timeouts against the
 * service's own limits, as each overlay configures them (defaults where it
 * sets none): a request the service would keep alive must not be cut in
 * front of it, and each value says in a comment which limit it follows.
 */

/** The longest `?wait=` / `Prefer: wait=` the task routes take, in seconds (docs/image-tasks.md). */
const MAX_WAIT_SEC = 60;

const source = (path: string) => readFileSync(join(KUSTOMIZE_ROOT, "components", path), "utf8");

const configs: Config[] = OVERLAYS.map((overlay) =>
  parseConfig(
    parseYaml(readFileSync(join(KUSTOMIZE_ROOT, "overlays", overlay, "config.yaml"), "utf8")),
    secretFilledIn(overlay),
  ),
);

/** The longest silence an answer may have, over both overlays' configurations. */
const longestSilenceSec = Math.max(
  MAX_WAIT_SEC,
  ...configs.flatMap((config) => config.channels.map((channel) => channel.imageTimeoutSec)),
);
/** The longest whole answer: a task's event stream lasts at least its run; a sync image call. */
const longestAnswerSec = Math.max(
  longestSilenceSec,
  ...configs.map((config) => config.imageTasks.timeoutSec),
  ...configs.map((config) => config.server.bodyTimeoutSec),
);
const largestBodyBytes = Math.max(
  ...configs.flatMap((config) => [config.server.maxUploadBytes, config.server.maxBodyBytes]),
);

/** nginx's size syntax: `65m`, `512k`, `1g`, bytes. */
function nginxBytes(size: string): number {
  const match = /^(\d+)([kmg]?)$/i.exec(size);
  if (!match) throw new Error(`not an nginx size: ${size}`);
  const unit = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[match[2]!.toLowerCase()]!;
  return Number(match[1]) * unit;
}

/** A Gateway API duration (GEP-2257: `1h`, `3600s`, `1h30m`, `500ms`) in seconds. */
function gatewaySeconds(duration: string): number {
  if (!/^([0-9]{1,5}(h|m|s|ms)){1,4}$/.test(duration)) {
    throw new Error(`not a Gateway API duration: ${duration}`);
  }
  const unit = { h: 3600, m: 60, s: 1, ms: 0.001 } as const;
  return [...duration.matchAll(/(\d+)(ms|h|m|s)/g)].reduce(
    (sum, [, count, name]) => sum + Number(count) * unit[name as keyof typeof unit],
    0,
  );
}

/** The pairs of a YAML map at `path`, each with the comment written above it. */
function commentedEntries(text: string, path: string[]) {
  const map = parseDocument(text).getIn(path, true);
  if (!isMap(map)) throw new Error(`no map at ${path.join(".")}`);
  return map.items.filter(isPair).map((pair, index) => ({
    key: String(isScalar(pair.key) ? pair.key.value : pair.key),
    value: String(isScalar(pair.value) ? pair.value.value : pair.value),
    // The parser gives the first entry's comment to the map itself.
    comment:
      (isScalar(pair.key) ? pair.key.commentBefore : undefined) ??
      (index === 0 ? map.commentBefore : undefined) ??
      "",
  }));
}

/** A comment names one of the service's limits (a config field) or the stream type it is for. */
const NAMES_A_LIMIT = /server\.\w+|imageTasks\.\w+|channels\[\]\.\w+|`?wait=|text\/event-stream/;

describe("components/ingress-nginx", () => {
  const entries = commentedEntries(source("ingress-nginx/ingress.yaml"), [
    "metadata",
    "annotations",
  ]);
  const annotation = (name: string) =>
    entries.find((entry) => entry.key === `nginx.ingress.kubernetes.io/${name}`)?.value;

  it("holds a silent answer (a sync image call, a wait) at least an hour between two reads", () => {
    expect(longestSilenceSec).toBeGreaterThanOrEqual(600);
    for (const name of ["proxy-read-timeout", "proxy-send-timeout"]) {
      const seconds = Number(annotation(name));
      expect(seconds, name).toBeGreaterThanOrEqual(3600);
      expect(seconds, name).toBeGreaterThan(longestSilenceSec);
    }
    for (const config of configs) {
      // An event stream is never silent that long: a comment every eventsKeepAliveSec.
      expect(config.imageTasks.eventsKeepAliveSec).toBeLessThan(
        Number(annotation("proxy-read-timeout")),
      );
      expect(config.server.bodyIdleSec).toBeLessThan(Number(annotation("proxy-send-timeout")));
    }
  });

  it("buffers neither event streams nor uploads, and takes the service's largest body", () => {
    expect(annotation("proxy-buffering")).toBe("off");
    expect(annotation("proxy-request-buffering")).toBe("off");
    // Above the limit, so that the service answers its own 413 JSON error.
    expect(nginxBytes(annotation("proxy-body-size")!)).toBeGreaterThan(largestBodyBytes);
    expect(largestBodyBytes).toBeGreaterThanOrEqual(64 * 1024 * 1024);
  });

  it("says above each annotation which limit it follows", () => {
    expect(entries.length).toBeGreaterThanOrEqual(5);
    for (const entry of entries) expect(entry.comment, entry.key).toMatch(NAMES_A_LIMIT);
  });

  it("catches a value below a limit (the checks can fail)", () => {
    expect(nginxBytes("64m")).toBe(largestBodyBytes);
    expect(nginxBytes("65m")).toBeGreaterThan(largestBodyBytes);
    expect(() => nginxBytes("64 MiB")).toThrow(/nginx size/);
    const bare = commentedEntries("metadata:\n  annotations:\n    a: '1'\n", [
      "metadata",
      "annotations",
    ]);
    expect(bare[0]!.comment).not.toMatch(NAMES_A_LIMIT);
  });
});

describe("components/gateway-api", () => {
  const text = source("gateway-api/http-route.yaml");
  const route = parseYaml(text) as {
    spec: { rules: Array<{ timeouts: { request: string; backendRequest: string } }> };
  };

  it("lets the longest answer (an event stream through a task's run) finish, on every rule", () => {
    expect(longestAnswerSec).toBeGreaterThanOrEqual(600);
    for (const [index, rule] of route.spec.rules.entries()) {
      const request = gatewaySeconds(rule.timeouts.request);
      const backend = gatewaySeconds(rule.timeouts.backendRequest);
      expect(request, `rules[${index}].timeouts.request`).toBeGreaterThanOrEqual(3600);
      expect(request).toBeGreaterThan(longestAnswerSec);
      expect(backend).toBeGreaterThan(longestAnswerSec);
      // Gateway API: backendRequest may not exceed request.
      expect(backend).toBeLessThanOrEqual(request);
      const comments = commentedEntries(text, ["spec", "rules", String(index), "timeouts"]);
      for (const entry of comments) expect(entry.comment, entry.key).toMatch(NAMES_A_LIMIT);
    }
  });

  it("reads durations as Gateway API does (the check can fail)", () => {
    expect(gatewaySeconds("1h")).toBe(3600);
    expect(gatewaySeconds("1h30m")).toBe(5400);
    expect(gatewaySeconds("500ms")).toBe(0.5);
    expect(() => gatewaySeconds("an hour")).toThrow(/duration/);
  });
});
