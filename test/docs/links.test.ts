import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { anchorsOf, markdownFiles, relativeLinksOf } from "./markdown.js";

// Every relative link of README.md and docs/ resolves: the file exists, and an
// anchor (`page.md#section`, `#section`) names a heading of that page.
const ROOT = resolve(import.meta.dirname, "../..");

/** What a link points at: `undefined` when it resolves, else why not. */
function brokenLink(file: string, target: string): string | undefined {
  const [path = "", anchor] = target.split("#", 2);
  const resolved = path
    ? normalize(join(dirname(join(ROOT, file)), decodeURI(path)))
    : join(ROOT, file);
  if (!resolved.startsWith(ROOT)) return "points outside the repository";
  if (!existsSync(resolved)) return "no such file";
  if (anchor === undefined) return undefined;
  if (statSync(resolved).isDirectory() || !resolved.endsWith(".md"))
    return "an anchor on a file that is not markdown";
  return anchorsOf(readFileSync(resolved, "utf8")).has(anchor) ? undefined : "no such heading";
}

/** Every file of the repository's code, as paths from the root. */
function codeFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? walk(join(dir, entry.name)) : [join(dir, entry.name)],
    );
  return [
    ...["src", "test", "bench", "scripts", "config", "deploy", "grafana"].flatMap(walk),
    ...readdirSync(ROOT).filter((name) => /\.(ts|mjs)$/.test(name)),
  ];
}

describe("relative links in README.md and docs/", () => {
  const files = markdownFiles(ROOT);

  it("finds the pages and their links", () => {
    expect(files).toContain("README.md");
    expect(files.length).toBeGreaterThan(8);
    expect(files.flatMap((file) => relativeLinksOf(ROOT, file)).length).toBeGreaterThan(20);
  });

  it.each(files)("%s: every relative link and anchor resolves", (file) => {
    const broken = relativeLinksOf(ROOT, file)
      .map((link) => ({ link, why: brokenLink(file, link.target) }))
      .filter(({ why }) => why !== undefined)
      .map(({ link, why }) => `${link.file}:${link.line} ${link.target}: ${why}`);
    expect(broken).toEqual([]);
  });

  it("catches a broken link and a broken anchor (the check can fail)", () => {
    expect(brokenLink("README.md", "docs/no-such-page.md")).toBe("no such file");
    expect(brokenLink("README.md", "#no-such-heading")).toBe("no such heading");
    expect(brokenLink("README.md", "docs/configuration.md#no-such-heading")).toBe(
      "no such heading",
    );
    expect(brokenLink("README.md", "docs/configuration.md#server")).toBeUndefined();
  });

  it("names headings as GitHub does", () => {
    const anchors = anchorsOf(
      "# Image tasks\n## `server.port` and more\n## Errors: codes & statuses\n## Errors: codes & statuses\n```\n# not a heading\n```\n",
    );
    expect([...anchors]).toEqual([
      "image-tasks",
      "serverport-and-more",
      "errors-codes--statuses",
      "errors-codes--statuses-1",
    ]);
  });

  it("names only source files that exist (`channel-try.ts`, `src/http/error-codes.ts`)", () => {
    const files = codeFiles();
    const named = markdownFiles(ROOT).flatMap((file) =>
      [...readFileSync(join(ROOT, file), "utf8").matchAll(/`([\w./-]+\.(?:ts|mjs))`/g)].map(
        (match) => ({ file, path: match[1]! }),
      ),
    );
    expect(named.length).toBeGreaterThan(20);
    const missing = named.filter(
      ({ path }) =>
        !files.some((candidate) => candidate === path || candidate.endsWith(`/${path}`)),
    );
    expect(missing.map(({ file, path }) => `${file}: ${path}`)).toEqual([]);
  });
});
