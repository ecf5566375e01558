// wrk as the load generator for fixed-duration loads: a C program that costs a few
// microseconds per request, where the Node load generator costs tens (on a 2-core machine it
// could become the bottleneck it measures). One thread, on the load side's cores. Each run's
// request comes from a Lua script written once per request shape; wrk's `done` hook prints
// the figures as one JSON line.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startProgram } from "./children.mjs";

/** True when `wrk` runs here. */
export function wrkAvailable() {
  const out = spawnSync("wrk", ["--version"], { encoding: "utf8" });
  return !out.error && /^wrk /m.test(`${out.stdout}${out.stderr}`);
}

const lua = (text) => JSON.stringify(text); // a JSON string is a valid Lua string literal here

const DONE = `
done = function(summary, latency, requests)
  io.write(string.format(
    '{"requests":%d,"durationUs":%d,"statusErrors":%d,"connectErrors":%d,"readErrors":%d,' ..
    '"writeErrors":%d,"timeouts":%d,"p50Us":%d,"p99Us":%d}\\n',
    summary.requests, summary.duration, summary.errors.status, summary.errors.connect,
    summary.errors.read, summary.errors.write, summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
`;

const scripts = new Map();

/** The Lua script for `request` ({path, method, headers, body | bodyBase64}), written once. */
function scriptFor(request, dir) {
  const key = JSON.stringify(request);
  if (scripts.has(key)) return scripts.get(key);
  const n = scripts.size + 1;
  const lines = [`wrk.method = ${lua(request.method ?? "GET")}`, `wrk.path = ${lua(request.path)}`];
  for (const [name, value] of Object.entries(request.headers ?? {}))
    lines.push(`wrk.headers[${lua(name)}] = ${lua(value)}`);
  const body = request.bodyBase64 ? Buffer.from(request.bodyBase64, "base64") : request.body;
  if (body !== undefined) {
    // Read from a file: a multipart body is binary.
    const file = join(dir, `wrk-body-${n}.bin`);
    writeFileSync(file, body);
    lines.push(`local f = io.open(${lua(file)}, "rb")`, "wrk.body = f:read('*a')", "f:close()");
  }
  const script = join(dir, `wrk-${n}.lua`);
  writeFileSync(script, `${lines.join("\n")}\n${DONE}`);
  scripts.set(key, script);
  return script;
}

/**
 * Runs wrk against `origin` for `durationMs` (whole seconds, at least one) with `concurrency`
 * connections; resolves what the Node load generator's `run` answers (ok, rps, p50Ms, p99Ms...).
 */
export async function runWrk(ctx, load) {
  // wrk once ended with status 0 and no summary line (a full run lost its proxy phase to it):
  // such a run is made again once, anything else fails as before.
  try {
    return await runWrkOnce(ctx, load);
  } catch (err) {
    if (!(err instanceof NoSummary)) throw err;
    return runWrkOnce(ctx, load);
  }
}

/** wrk ended without the summary line its `done` hook prints. */
class NoSummary extends Error {}

async function runWrkOnce(ctx, { origin, request, concurrency, durationMs }) {
  const seconds = Math.max(1, Math.round(durationMs / 1000));
  const script = scriptFor(request, ctx.tempDir);
  const { child, exited } = startProgram(
    "wrk",
    ["-t1", `-c${concurrency}`, `-d${seconds}s`, "--timeout", "10s", "-s", script, origin],
    { group: ctx.group, collect: true },
  );
  const onAbort = () => child.kill("SIGKILL");
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  const code = await exited;
  ctx.signal.removeEventListener("abort", onAbort);
  ctx.check();
  const line = child.output
    .split("\n")
    .reverse()
    .find((text) => text.startsWith("{"));
  if (code === 0 && !line) throw new NoSummary(`wrk printed no summary: ${child.errors.trim()}`);
  if (code !== 0 || !line) throw new Error(`wrk exited ${code}: ${child.errors.trim()}`);
  const r = JSON.parse(line);
  const errors = r.connectErrors + r.readErrors + r.writeErrors + r.timeouts;
  const ok = r.requests - r.statusErrors;
  return {
    requests: r.requests + errors,
    ok,
    errors,
    statuses: r.statusErrors ? { "non-2xx": r.statusErrors } : {},
    seconds: r.durationUs / 1e6,
    rps: ok / (r.durationUs / 1e6),
    p50Ms: r.p50Us / 1000,
    p99Ms: r.p99Us / 1000,
  };
}
