import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const TOOL = resolve(import.meta.dirname, "../../bench/callgrind-functions.mjs");
const dir = mkdtempSync(join(tmpdir(), "bench-callgrind-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A dump as callgrind writes one with --compress-strings=no --dump-line=no: a function's own
// cost lines, and after `calls=` the inclusive cost of a call. Compiled code is an address.
const DUMP = `# callgrind format
version: 1
pid: 4242
positions: line
events: Ir
summary: 4600

ob=???
fn=0x0000000000001010
0 1000
cfn=Builtins_JsonParse
calls=2 0
0 2500

fn=Builtins_JsonParse
0 2500

fn=0x0000000000002008
0 600
cfn=0x0000000000001010
calls=1 0
0 3500

fn=0x0000000000009000
0 500
`;

// V8's perf map: start, size (hex), name; code recompiled at the same place is written again.
const MAP = `1000 100 JS:~answer file:///app/dist/deliver.js:1:1
1000 100 JS:*answer file:///app/dist/deliver.js:1:1
2000 40 JS:*serve file:///app/dist/serve.js:3:1
`;

function tool(...args: string[]): string {
  const run = spawnSync(process.execPath, [TOOL, ...args], { encoding: "utf8" });
  expect(run.stderr).toBe("");
  expect(run.status).toBe(0);
  return run.stdout;
}

const rows = (text: string) =>
  text
    .trim()
    .split("\n")
    .map((line) => line.trim().split(/\s+/));

describe("bench/callgrind-functions.mjs", () => {
  const dump = join(dir, "callgrind.service.4242.3-01");
  writeFileSync(dump, DUMP);
  writeFileSync(join(dir, "perf-4242.map"), MAP);

  it("names compiled code from the perf map beside the dump, and sums self costs per request", () => {
    const out = tool(dump, "--per", "10");
    expect(rows(out)).toEqual([
      ["460", "in", "all"],
      ["250", "Builtins_JsonParse"],
      ["100", "JS", "JS:*answer", "file:///app/dist/deliver.js:1:1"],
      ["60", "JS", "JS:*serve", "file:///app/dist/serve.js:3:1"],
      ["50", "compiled", "code,", "unnamed"],
    ]);
  });

  it("gives a function's callers, and its inclusive cost with its callees", () => {
    expect(tool(dump, "--callers", "JsonParse")).toContain("2500 Builtins_JsonParse (callers)");
    const inclusive = tool(dump, "--inclusive", "*answer");
    expect(inclusive).toMatch(/3500 JS JS:\*answer .* \(callees, itself 1000\)/);
    expect(inclusive).toMatch(/2500 Builtins_JsonParse/);
  });

  it("sets one dump against another, function by function", () => {
    const other = join(dir, "callgrind.pipe.4243.3-01");
    writeFileSync(
      other,
      // The same process, its JSON.parse a fifth as costly.
      DUMP.replace("pid: 4242", "pid: 4243").replace(
        /^fn=Builtins_JsonParse\n0 2500$/m,
        "fn=Builtins_JsonParse\n0 500",
      ),
    );
    const out = tool(dump, "--against", other);
    expect(out).toContain("2000 more in all (4600 against 2600)");
    expect(rows(out)[1]).toEqual(["2000", "2500", "500", "Builtins_JsonParse"]);
  });

  it("reads another event of a count made with the cache simulation, by function and in total", () => {
    // Events per cost line in the header's order; callgrind leaves trailing zeros out.
    const cached = join(dir, "callgrind.service.4244.1-01");
    writeFileSync(
      cached,
      `events: Ir I1mr Bcm
summary: 4600 70 12

fn=0x0000000000001010
0 1000 40 2
fn=Builtins_JsonParse
0 2500 30 10
fn=0x0000000000009000
0 500
`,
    );
    writeFileSync(join(dir, "perf-4244.map"), MAP);
    expect(rows(tool(cached, "--event", "I1mr"))).toEqual([
      ["70", "in", "all"],
      ["40", "JS", "JS:*answer", "file:///app/dist/deliver.js:1:1"],
      ["30", "Builtins_JsonParse"],
      ["0", "compiled", "code,", "unnamed"],
    ]);
    expect(rows(tool(cached, "--events", "--per", "2"))).toEqual([
      ["2300", "Ir"],
      ["35", "I1mr"],
      ["6", "Bcm"],
    ]);
    const missing = spawnSync(process.execPath, [TOOL, dump, "--event", "I1mr"], {
      encoding: "utf8",
    });
    expect(missing.status).not.toBe(0);
    expect(missing.stderr).toContain("no event I1mr");
  });
});
