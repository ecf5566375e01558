import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { markdownFiles } from "./markdown.js";

/*
 * The docs show only install commands that work today. The package is not
 * published on npm, so `npx image-task-sidecar` fails with a 404 from the
 * registry, and once someone else claims the name it would run their code on
 * every reader's machine: no page, example config or manifest may say it,
 * nor an MCP client config that runs `npx` with it.
 */

const ROOT = resolve(import.meta.dirname, "../..");

/** `npx [flags] image-task-sidecar`, and an MCP config's `"command": "npx"` running it. */
const NPX = /\bnpx(\s+(-y|--yes|-p\s+\S+|--package[= ]\S+))*\s+image-task-sidecar\b/;
const NPX_CONFIG = /"command"\s*:\s*"npx"[^}]*?"image-task-sidecar"/s;

/** The text files besides the docs that people copy commands from. */
function otherFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? walk(join(dir, entry.name)) : [join(dir, entry.name)],
    );
  return [...["config", "deploy"].flatMap(walk), "Dockerfile", "package.json"].filter((file) =>
    /(\.(ya?ml|json|md|sh)|Dockerfile)$/.test(file),
  );
}

/** Every `file:line` that runs the package with npx. */
function npxUses(files: readonly string[]): string[] {
  const found: string[] = [];
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), "utf8");
    text.split("\n").forEach((line, index) => {
      if (NPX.test(line)) found.push(`${file}:${index + 1}: ${line.trim()}`);
    });
    for (const match of text.matchAll(new RegExp(NPX_CONFIG, "gs"))) {
      const line = text.slice(0, match.index).split("\n").length;
      found.push(`${file}:${line}: an MCP config runs "npx" with image-task-sidecar`);
    }
  }
  return found;
}

describe("install commands in the docs", () => {
  it("never say npx image-task-sidecar (the package is not published)", () => {
    expect(npxUses([...markdownFiles(ROOT), ...otherFiles()])).toEqual([]);
  });

  it("would catch it, in a command and in an MCP client config", () => {
    expect(NPX.test("npx image-task-sidecar serve --config config.yaml")).toBe(true);
    expect(NPX.test("  -- npx -y image-task-sidecar mcp")).toBe(true);
    expect(NPX.test("npm install -g ./image-task-sidecar-0.1.0.tgz")).toBe(false);
    expect(
      NPX_CONFIG.test(`"command": "npx",\n      "args": ["-y", "image-task-sidecar", "mcp"],`),
    ).toBe(true);
    expect(NPX_CONFIG.test(`"command": "image-task-sidecar",\n "args": ["mcp"]`)).toBe(false);
  });

  it("show the commands that work: from a checkout, or npm pack and npm install -g", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    expect(readme).toContain("npm install -g ./image-task-sidecar-*.tgz");
    expect(readme).toContain("node dist/cli.js");
    const mcp = readFileSync(join(ROOT, "docs/mcp.md"), "utf8");
    expect(mcp).toContain("npm install -g ./image-task-sidecar-*.tgz");
    expect(mcp).toContain('"command": "image-task-sidecar"');
  });
});
