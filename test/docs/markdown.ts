import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** A fenced code block of a markdown file. */
export interface MarkdownBlock {
  /** Path from the repository root. */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** `file:line`, for messages. */
  where: string;
  /** The info string's first word (`sh`, `yaml`, ...), "" when none. */
  lang: string;
  code: string;
  /**
   * The reason given by an HTML comment `<!-- not-run: reason -->` on the line
   * before the fence (blank lines between allowed), which marks a block that
   * is not meant to run as it stands.
   */
  notRun?: string;
}

/** README.md and every page under docs/, as paths from the repository root. */
export function markdownFiles(root: string): string[] {
  const pages = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory()
        ? pages(join(dir, entry.name))
        : entry.name.endsWith(".md")
          ? [join(dir, entry.name)]
          : [],
    );
  return ["README.md", ...pages("docs")];
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^`\s]*)?.*$/;
const NOT_RUN = /^<!--\s*not-run:\s*(.+?)\s*-->$/;

/** The fenced code blocks of one file. */
export function blocksOf(root: string, file: string): MarkdownBlock[] {
  const lines = readFileSync(join(root, file), "utf8").split("\n");
  const blocks: MarkdownBlock[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const open = FENCE.exec(lines[i]!);
    if (!open) continue;
    const [, indent = "", fence = "", lang = ""] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j += 1) {
      const line = lines[j]!;
      if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, "") === "") break;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line.trimStart());
    }
    let before = i - 1;
    while (before >= 0 && lines[before]!.trim() === "") before -= 1;
    const notRun = before >= 0 ? NOT_RUN.exec(lines[before]!.trim())?.[1] : undefined;
    blocks.push({
      file,
      line: i + 1,
      where: `${file}:${i + 1}`,
      lang,
      code: body.join("\n"),
      ...(notRun ? { notRun } : {}),
    });
    i = j;
  }
  return blocks;
}

/** Every fenced block of README.md and docs/. */
export function markdownBlocks(root: string): MarkdownBlock[] {
  return markdownFiles(root).flatMap((file) => blocksOf(root, file));
}

/** The text of a file with its fenced blocks and inline code blanked, line numbers kept. */
export function proseOf(text: string): string {
  const lines = text.split("\n");
  let fence: string | undefined;
  return lines
    .map((line) => {
      const open = FENCE.exec(line);
      if (fence) {
        if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, "") === "") {
          fence = undefined;
        }
        return "";
      }
      if (open) {
        fence = open[2];
        return "";
      }
      return line.replace(/`[^`]*`/g, "``");
    })
    .join("\n");
}

/**
 * The anchors GitHub gives a page's headings (lower case, punctuation but `-`
 * and `_` dropped, spaces as `-`, repeats numbered), and explicit `id`/`name`s.
 */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseOfKeepingCode(text).split("\n")) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const slug = heading[1]!
        .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
        .replace(/<[^>]+>/g, "")
        .toLowerCase()
        .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
        .replace(/ /g, "-");
      const count = seen.get(slug) ?? 0;
      seen.set(slug, count + 1);
      anchors.add(count === 0 ? slug : `${slug}-${count}`);
    }
    for (const match of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(match[1]!);
  }
  return anchors;
}

/** Fenced blocks blanked, inline code kept (headings keep their code spans' text). */
function proseOfKeepingCode(text: string): string {
  let fence: string | undefined;
  return text
    .split("\n")
    .map((line) => {
      const open = FENCE.exec(line);
      if (fence) {
        if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, "") === "") {
          fence = undefined;
        }
        return "";
      }
      if (open) {
        fence = open[2];
        return "";
      }
      return line;
    })
    .join("\n");
}

/** A relative link of a page: its target as written, and where it is. */
export interface MarkdownLink {
  file: string;
  line: number;
  target: string;
}

/** The links of a page that point inside the repository (markdown and HTML `href`/`src`). */
export function relativeLinksOf(root: string, file: string): MarkdownLink[] {
  const prose = proseOf(readFileSync(join(root, file), "utf8"));
  const links: MarkdownLink[] = [];
  prose.split("\n").forEach((line, index) => {
    const targets = [
      ...[...line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map(
        (m) => m[1]!,
      ),
      ...[...line.matchAll(/\b(?:href|src)="([^"]+)"/g)].map((m) => m[1]!),
      ...[...line.matchAll(/^\s*\[[^\]]+\]:\s+(\S+)/g)].map((m) => m[1]!),
    ];
    for (const target of targets) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      links.push({ file, line: index + 1, target });
    }
  });
  return links;
}
