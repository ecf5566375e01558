import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

/*
 * bench/ablate.mjs makes copies of the build without some of the passthrough's contract parts,
 * measured as BASELINE beside the real build. Its edits are exact texts of the compiled code:
 * these tests fail when the code moves so that one no longer applies (`npm test` builds dist/
 * first).
 */

const ROOT = resolve(import.meta.dirname, "../..");
const TOOL = join(ROOT, "bench/ablate.mjs");
const DIST = join(ROOT, "dist");
const dir = mkdtempSync(join(tmpdir(), "bench-ablate-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ablate = (...args: string[]) =>
  spawnSync(process.execPath, [TOOL, ...args], { cwd: ROOT, encoding: "utf8" });

describe("bench/ablate.mjs", () => {
  it("takes every part out of a copy of the build, and the copy still loads", () => {
    const out = join(dir, "all");
    const run = ablate("all", "--out", out);
    expect(run.status, run.stderr).toBe(0);
    const answer = readFileSync(join(out, "dist/proxy/deliver-answer.js"), "utf8");
    expect(answer).not.toContain("JSON.parse(body");
    expect(answer).not.toContain("scrubber.scrub(body)");
    const observe = readFileSync(join(out, "dist/observability/observe-requests.js"), "utf8");
    expect(observe).not.toContain(
      "logAccess(deps, req, res, context, route, seconds, probe, aborted);",
    );
    expect(observe).not.toContain("httpRequestSeries.get(");
    expect(readFileSync(join(out, "dist/observability/request-id.js"), "utf8")).toContain(
      '"req-ablated"',
    );
    // The build itself is untouched.
    expect(readFileSync(join(DIST, "proxy/deliver-answer.js"), "utf8")).toContain(
      'JSON.parse(body.toString("utf8"))',
    );
    const app = pathToFileURL(join(out, "dist/app.js")).href;
    const load = spawnSync(
      process.execPath,
      ["--input-type=module", "-e", `await import(${JSON.stringify(app)})`],
      { encoding: "utf8" },
    );
    expect(load.status, load.stderr).toBe(0);
  });

  it("stops, naming the part and the file, when the code it edits has changed", () => {
    const changed = join(dir, "changed-dist");
    cpSync(DIST, changed, { recursive: true });
    writeFileSync(
      join(changed, "observability/request-id.js"),
      "export function requestIdOf() {\n  return crypto.randomUUID();\n}\n",
    );
    const out = join(dir, "stale");
    const run = ablate("json", "request-id", "--out", out, "--dist", changed);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain("request-id: observability/request-id.js has its text 0 times");
    expect(existsSync(out)).toBe(false);
  });

  it("refuses an unknown part", () => {
    const run = ablate("logging", "--out", join(dir, "unknown"));
    expect(run.status).toBe(2);
    expect(run.stderr).toContain("unknown: logging");
  });
});
