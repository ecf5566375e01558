import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./kustomize.js";

/*
 * The Dockerfile, read as Docker reads it (no Docker engine here): stages,
 * the user, the dependencies the image keeps, and how node is started, so
 * that the image runs under the pods' security (non-root by number, nothing
 * written outside the mounted volumes, signals reaching node).
 */

interface Instruction {
  keyword: string;
  args: string;
}

interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

/** The stages of a Dockerfile, continuation lines joined, comments left out. */
function stagesOf(text: string): Stage[] {
  const joined = text
    .split("\n")
    .filter((line) => !/^\s*#/.test(line))
    .join("\n")
    .replace(/\\\n/g, " ");
  const stages: Stage[] = [];
  for (const line of joined.split("\n")) {
    const match = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!match) continue;
    const keyword = match[1]!.toUpperCase();
    const args = match[2]!.trim();
    if (keyword === "FROM") {
      const [from, as, name] = args.split(/\s+/);
      stages.push({
        from: from!,
        name: as?.toUpperCase() === "AS" ? name : undefined,
        instructions: [],
      });
    } else {
      stages.at(-1)?.instructions.push({ keyword, args });
    }
  }
  return stages;
}

/** The argument vector of an exec-form instruction (`["node", "x"]`), undefined for shell form. */
function execForm(args: string): string[] | undefined {
  try {
    const parsed = JSON.parse(args) as unknown;
    return Array.isArray(parsed) && parsed.every((part) => typeof part === "string")
      ? parsed
      : undefined;
  } catch {
    return undefined;
  }
}

/** What keeps a Dockerfile's image from running as the deployment runs it; [] when nothing. */
function dockerfileProblems(text: string): string[] {
  const problems: string[] = [];
  const stages = stagesOf(text);
  const runtime = stages.at(-1);
  if (stages.length < 2 || !runtime) return ["not multi-stage: build and runtime in one image"];
  const all = (stage: Stage, keyword: string) =>
    stage.instructions.filter((instruction) => instruction.keyword === keyword);
  const build = stages.slice(0, -1);
  // Production dependencies only: installed with --omit=dev, or pruned after the build.
  const runs = build.flatMap((stage) => all(stage, "RUN").map((run) => run.args));
  if (!runs.some((run) => /npm (ci|prune)\b[^&]*--omit=dev/.test(run))) {
    problems.push("no `npm ci --omit=dev` or `npm prune --omit=dev` in a build stage");
  }
  const copies = all(runtime, "COPY").map((copy) => copy.args);
  if (!copies.some((copy) => /--from=\S+\s+\S*node_modules/.test(copy))) {
    problems.push("the runtime stage does not take node_modules from a build stage");
  }
  for (const run of all(runtime, "RUN").map((r) => r.args)) {
    if (/\bnpm (ci|install|i)\b/.test(run) && !/--omit=dev/.test(run)) {
      problems.push(`the runtime stage installs dev dependencies: ${run}`);
    }
    if (/\b(g\+\+|gcc|make|python3)\b/.test(run))
      problems.push(`build tools in the runtime stage: ${run}`);
  }
  // Non-root, by number (runAsNonRoot cannot check a name).
  const user = all(runtime, "USER").at(-1)?.args;
  const uid = user?.split(":")[0];
  if (!uid || !/^\d+$/.test(uid)) problems.push(`USER is not numeric: ${user ?? "(none)"}`);
  else if (Number(uid) === 0) problems.push("USER is root");
  // node itself as PID 1, in exec form: SIGTERM reaches it, and npm writes nothing to a read-only root.
  const entrypoint = all(runtime, "ENTRYPOINT").at(-1)?.args;
  const cmd = all(runtime, "CMD").at(-1)?.args;
  if (entrypoint !== undefined) problems.push(`an ENTRYPOINT stands before node: ${entrypoint}`);
  const argv = cmd === undefined ? undefined : execForm(cmd);
  if (!argv) problems.push(`CMD is not in exec form: ${cmd ?? "(none)"}`);
  else if (argv[0] !== "node") problems.push(`CMD does not start node itself: ${cmd}`);
  return problems;
}

const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");

describe("Dockerfile", () => {
  it("builds in one stage and runs production dependencies only, non-root, node in exec form", () => {
    expect(dockerfileProblems(dockerfile)).toEqual([]);
    const stages = stagesOf(dockerfile);
    expect(stages.map((stage) => stage.name)).toEqual(["build", "runtime"]);
    // The official image's `node` user, which the pods run as.
    expect(stages[1]!.instructions.filter((i) => i.keyword === "USER").at(-1)?.args).toBe(
      "1000:1000",
    );
  });

  it("starts the compiled entry of `npm start`, whose source exists", () => {
    const cmd = stagesOf(dockerfile)[1]!.instructions.find((i) => i.keyword === "CMD")!;
    const script = (JSON.parse(cmd.args) as string[])[1]!;
    const start = (
      JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
        scripts: { start: string };
      }
    ).scripts.start;
    // `exec`: the start script's shell hands its process to node, so a signal to npm reaches it.
    expect(start).toBe(`exec node ${script}`);
    expect(existsSync(join(ROOT, script.replace(/^dist\//, "src/").replace(/\.js$/, ".ts")))).toBe(
      true,
    );
  });

  it("writes only where the pods mount volumes: /app/data (the defaults' ./data) and /tmp", () => {
    const runtime = stagesOf(dockerfile)[1]!;
    const workdir = runtime.instructions.filter((i) => i.keyword === "WORKDIR").at(-1)?.args;
    expect(workdir).toBe("/app");
    // The embedded defaults keep SQLite and images under ./data, the one directory made writable.
    expect(readFileSync(join(ROOT, "config/default.yaml"), "utf8")).toContain("sqlite://./data/");
    const volumes = runtime.instructions.filter((i) => i.keyword === "VOLUME").map((i) => i.args);
    expect(volumes).toEqual(['["/app/data"]']);
    const chowned = runtime.instructions
      .filter((i) => i.keyword === "RUN")
      .flatMap((i) => [...i.args.matchAll(/chown\s+(\S+)\s+(\S+)/g)].map((m) => [m[1], m[2]]));
    expect(chowned).toEqual([["1000:1000", "/app/data"]]);
  });

  it("refuses a Dockerfile that breaks the rules (the check can fail)", () => {
    const broken = (from: string, to: string) => {
      expect(dockerfile).toContain(from);
      return dockerfileProblems(dockerfile.replace(from, to));
    };
    expect(broken("USER 1000:1000", "USER node")).toEqual(["USER is not numeric: node"]);
    expect(broken("USER 1000:1000", "USER 0")).toEqual(["USER is root"]);
    expect(broken('CMD ["node", "dist/main.js"]', "CMD npm start")).toEqual([
      "CMD is not in exec form: npm start",
    ]);
    expect(broken('CMD ["node", "dist/main.js"]', 'CMD ["npm", "start"]')).toEqual([
      'CMD does not start node itself: ["npm", "start"]',
    ]);
    expect(broken(" && npm prune --omit=dev --no-audit --no-fund", "")).toEqual([
      "no `npm ci --omit=dev` or `npm prune --omit=dev` in a build stage",
    ]);
    expect(dockerfileProblems('FROM node:22\nCMD ["node", "x.js"]\n')).toEqual([
      "not multi-stage: build and runtime in one image",
    ]);
  });
});
