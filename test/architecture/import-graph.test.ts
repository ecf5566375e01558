import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/*
 * The layering the code promises (docs/architecture.md), checked on every
 * run: no import cycle between files (type imports included), no two folders
 * importing each other, the lower layers free of HTTP, no file over 400 lines.
 */

const SRC = resolve(import.meta.dirname, "../../src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

const IMPORT =
  /(?:import|export)\s[^;]*?from\s+["'](\.[^"']+)["']|import\(\s*["'](\.[^"']+)["']\s*\)/gs;

/** Each file's relative imports, as paths of files under src/. */
function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = new Set<string>();
    for (const match of readFileSync(file, "utf8").matchAll(IMPORT)) {
      const target = resolve(dirname(file), (match[1] ?? match[2]) as string).replace(
        /\.js$/,
        ".ts",
      );
      if (known.has(target)) targets.add(target);
    }
    graph.set(file, [...targets]);
  }
  return graph;
}

/** Strongly connected components of more than one file (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next += 1;
    stack.push(node);
    onStack.add(node);
    for (const target of graph.get(node) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node)!, index.get(target)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) found.push(component);
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

/** A file's folder below src/, cut to its first `depth` levels (`tasks/http` -> `tasks`). */
const folderOf = (file: string, depth = Infinity) =>
  relative(SRC, dirname(file)).split("/").slice(0, depth).join("/") || ".";

/** Folder -> the folders its files import. */
function folderGraph(graph: Map<string, string[]>, depth = Infinity): Map<string, Set<string>> {
  const folders = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    for (const target of targets) {
      const from = folderOf(file, depth);
      const to = folderOf(target, depth);
      if (from === to) continue;
      if (!folders.has(from)) folders.set(from, new Set());
      folders.get(from)!.add(to);
    }
  }
  return folders;
}

const files = sourceFiles(SRC);
const graph = importGraph(files);

describe("the import graph of src/", () => {
  it("reads the imports it checks (the check can fail)", () => {
    expect(files.length).toBeGreaterThan(200);
    const server = graph.get(join(SRC, "server.ts"))!;
    expect(server).toContain(join(SRC, "app.ts"));
    const looped = new Map(graph);
    looped.set(join(SRC, "app.ts"), [...graph.get(join(SRC, "app.ts"))!, join(SRC, "server.ts")]);
    expect(cycles(looped).length).toBeGreaterThan(0);
  });

  it("has no cycle between files, type imports included", () => {
    expect(cycles(graph).map((cycle) => cycle.map((file) => relative(SRC, file)))).toEqual([]);
  });

  it("has no circle of folders, at any depth and between top-level folders", () => {
    for (const depth of [Infinity, 1]) {
      const folders = folderGraph(graph, depth);
      const asFiles = new Map([...folders].map(([from, to]) => [from, [...to]]));
      expect(cycles(asFiles), `folders at depth ${depth}`).toEqual([]);
    }
  });

  it("has no two folders importing each other", () => {
    const folders = folderGraph(graph);
    const mutual = [...folders].flatMap(([from, targets]) =>
      [...targets]
        .filter((to) => from < to && folders.get(to)?.has(from))
        .map((to) => `${from} <-> ${to}`),
    );
    expect(mutual).toEqual([]);
  });

  it("keeps HTTP out of the lower layers: channels, images, redis, the task core, store and queue", () => {
    const lower = [
      "channels",
      "images",
      "redis",
      "errors",
      "tasks/core",
      "tasks/store",
      "tasks/queue",
    ];
    const folders = folderGraph(graph);
    const offending = lower.flatMap((folder) =>
      [...(folders.get(folder) ?? [])].filter((to) => to === "http").map(() => folder),
    );
    expect(offending).toEqual([]);
  });

  it("has no source file over 400 lines", () => {
    const long = files
      .map((file) => ({
        file: relative(SRC, file),
        lines: readFileSync(file, "utf8").split("\n").length,
      }))
      .filter(({ lines }) => lines > 400);
    expect(long).toEqual([]);
  });
});

describe("the task store's interface", () => {
  const text = readFileSync(join(SRC, "tasks/core/task-store.ts"), "utf8");

  it("stays small: at most 15 members, none of them for image bytes or one backend alone", () => {
    const body = /export interface TaskStore \{([\s\S]*?)\n\}/.exec(text)?.[1] ?? "";
    const members = [...body.matchAll(/^ {2}(?:readonly )?(\w+)(\??)[(:<]/gm)];
    expect(members.length).toBeGreaterThan(5);
    expect(members.length).toBeLessThanOrEqual(15);
    const names = members.map((m) => m[1]);
    expect(names.filter((name) => /Image|Input/.test(name ?? ""))).toEqual([]);
    // What only some backends offer (a webhook journal, key-value entries) is the backend's.
    expect(members.filter((m) => m[2] === "?").map((m) => m[1])).toEqual([]);
  });

  it("imports neither Keyv nor the webhooks", () => {
    const imports = [...text.matchAll(/from\s+["']([^"']+)["']/g)].map((m) => m[1]);
    expect(imports.filter((from) => /keyv|webhooks/.test(from ?? ""))).toEqual([]);
  });
});

describe("what the deployment is, told apart once", () => {
  const outsideConfig = files.filter((file) => !relative(SRC, file).startsWith("config/"));
  /** Files outside `src/config/` whose text matches `pattern`, relative to src/. */
  const matching = (pattern: RegExp) =>
    outsideConfig
      .filter((file) => pattern.test(readFileSync(file, "utf8")))
      .map((file) => relative(SRC, file))
      .sort();

  it("reads no store URL's scheme outside the config (the deployment says what it is)", () => {
    // Masking credentials reads a URL's shape (several hosts), not what the deployment is.
    const masking = "logging/redact-url.ts";
    const scheme = String.raw`(?:rediss?|sqlite|s3|file|memory)(?:\+\w+)?:`;
    expect(
      matching(
        new RegExp(
          [
            String.raw`startsWith\(\s*["'\`]${scheme}`,
            String.raw`[!=]==?\s*["'\`]${scheme}`,
            String.raw`/\^\(?${scheme.slice(0, -1)}`,
          ].join("|"),
        ),
      ).filter((file) => file !== masking),
    ).toEqual([]);
  });

  it("tells the task backends apart in one file, the image stores in one, Redis topologies in one", () => {
    expect(matching(/(?:case |kind [!=]==? )"(?:sqlite|redis)"/)).toEqual([
      "tasks/open-task-backend.ts",
    ]);
    expect(matching(/(?:case |kind [!=]==? )"(?:directory|s3)"/)).toEqual([
      "images/open-image-store.ts",
    ]);
    expect(
      matching(/isCluster\b|\.mode [!=]==? "|case "(?:standalone|sentinel|cluster)"|new Cluster\(/),
    ).toEqual(["redis/redis-topologies.ts"]);
  });

  it("names each Redis key in one file", () => {
    // A key is `<prefix>::<name>`: a template that joins a prefix to `::`.
    expect(matching(/\}::[\w-]|`[^`]*::\$\{/)).toEqual(["redis/redis-keys.ts"]);
  });
});

describe("the task contract", () => {
  const CONTRACT = join(SRC, "contract/task-contract.ts");
  const CONSOLE = resolve(SRC, "../console/src");

  it("is free of dependencies", () => {
    expect(readFileSync(CONTRACT, "utf8")).not.toMatch(/\bimport\b|\brequire\(/);
  });

  it("is what the task presenter, the MCP client and the console import", () => {
    const importsContract = (file: string) =>
      [...readFileSync(file, "utf8").matchAll(IMPORT)].some(
        (match) =>
          resolve(dirname(file), (match[1] ?? match[2]) as string).replace(/\.js$/, ".ts") ===
          CONTRACT,
      );
    for (const file of [
      join(SRC, "tasks/view/present-task.ts"),
      join(SRC, "mcp/client/image-task.ts"),
      join(CONSOLE, "task-types.ts"),
    ]) {
      expect(importsContract(file), relative(SRC, file)).toBe(true);
    }
  });

  it("holds the only task id patterns of the service, the MCP client and the console", () => {
    // Native ids (`task_`) and sub2api's (`imgtask_`) alike.
    const holders = [...files, ...sourceFiles(CONSOLE)].filter((file) =>
      /\/\^(img)?task_/.test(readFileSync(file, "utf8")),
    );
    expect(holders.map((file) => relative(SRC, file))).toEqual(["contract/task-contract.ts"]);
  });
});

describe("the MCP tools", () => {
  it("call the task service, not the HTTP adapter: only their HTTP transport imports http/", () => {
    const offending = files
      .filter(
        (file) =>
          folderOf(file, 1) === "mcp" &&
          !file.endsWith("mcp-lane.ts") &&
          !file.endsWith("serve-mcp-request.ts"),
      )
      .flatMap((file) =>
        (graph.get(file) ?? [])
          .filter((target) => ["http", "tasks/http"].includes(folderOf(target)))
          .map((target) => `${relative(SRC, file)} -> ${relative(SRC, target)}`),
      );
    expect(offending).toEqual([]);
  });
});
