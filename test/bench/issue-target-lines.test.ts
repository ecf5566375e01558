import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

interface TargetLine {
  target: string;
  measured: string;
  met: boolean | null;
}
interface Table {
  title: string;
  rows: string[][];
}
interface FreshRound {
  cpuMsPerTask: number;
  stepMsPerTask: number[];
  rssBeforeMiB: number;
  rssAfterMiB: number;
  failed: number;
}
interface Fresh {
  tasks: number;
  concurrency: number;
  step: number;
  rounds: FreshRound[];
}

// Paths in variables: the bench is plain JavaScript without type declarations.
const lib = (name: string) =>
  pathToFileURL(resolve(import.meta.dirname, `../../bench/lib/${name}`)).href;
const { issueTargets } = (await import(lib("issue-targets.mjs"))) as {
  issueTargets(phases: Record<string, { figures: unknown }>): TargetLine[];
};
const { summarize } = (await import(lib("memory-report.mjs"))) as {
  summarize(out: { figures: unknown; tables?: Table[] }, setups: unknown[]): void;
};

const round = (changes: Partial<FreshRound> = {}): FreshRound => ({
  cpuMsPerTask: 8.4,
  stepMsPerTask: [12.6, 8.2, 8.2, 6.6, 7, 6],
  rssBeforeMiB: 118,
  rssAfterMiB: 159,
  failed: 0,
  ...changes,
});
/** The check's figures: one round, `changes` applied to it, unless `rounds` are given. */
const fresh = (changes: Partial<FreshRound> = {}, rounds = [round(changes)]): Fresh => ({
  tasks: 300,
  concurrency: 4,
  step: 50,
  rounds,
});

/** The fresh start's two target lines, as the bench prints them. */
function freshTargets(figures: Record<string, unknown>) {
  const lines = issueTargets({ memory: { figures: { setups: {}, ...figures } } });
  return lines.filter((line) => /from a fresh start/.test(line.target));
}

describe("the memory phase's fresh start (the issue's 300 real-size tasks)", () => {
  it("prints a CPU and an RSS target line, met by the figures", () => {
    const [cpu, rss] = freshTargets({ fresh: fresh() });
    expect(cpu?.target).toBe(
      "300 real-size tasks from a fresh start, Redis, default image directory: service CPU per task <= 10 ms",
    );
    expect(cpu?.measured).toBe("8.4 ms (first 50: 12.6 ms)");
    expect(cpu?.met).toBe(true);
    expect(rss?.target).toMatch(/RSS after them < 200 MB without allocator tuning$/);
    expect(rss?.measured).toBe("167 MB (before: 124 MB)");
    expect(rss?.met).toBe(true);
  });

  it("says not met past the limits, and decides nothing when a task failed or malloc was tuned", () => {
    const [cpu, rss] = freshTargets({ fresh: fresh({ cpuMsPerTask: 11.2, rssAfterMiB: 200 }) });
    expect(cpu?.met).toBe(false);
    expect(rss?.met).toBe(false);
    const failed = freshTargets({ fresh: fresh({ failed: 1 }) });
    expect(failed.map((line) => line.met)).toEqual([null, null]);
    const tuned = freshTargets({ fresh: fresh(), malloc: "131072" });
    expect(tuned.map((line) => line.met)).toEqual([true, null]);
  });

  it("has no line without the figures (no Redis), and a table of its own with them", () => {
    expect(freshTargets({})).toEqual([]);
    expect(freshTargets({ fresh: fresh({}, []) })).toEqual([]);
    const out: { figures: unknown; tables?: Table[] } = {
      figures: { rounds: 5, tasksPerRound: 60, tasks: 10_000, setups: {}, fresh: fresh() },
    };
    summarize(out, []);
    const table = out.tables?.[0];
    expect(table?.title).toMatch(/^Real-size tasks from a fresh start/);
    expect(table?.rows).toEqual([
      ["300", "8.4", "12.6, 8.2, 8.2, 6.6, 7.0, 6.0", "118.0", "159.0", "0"],
    ]);
  });

  it("judges the median of several fresh starts, with their spread, and adds a median row", () => {
    const rounds = [
      round({ cpuMsPerTask: 12.2, stepMsPerTask: [22.8, 9], rssAfterMiB: 171 }),
      round({ cpuMsPerTask: 9.1, stepMsPerTask: [20.9, 8], rssAfterMiB: 168 }),
      round({ cpuMsPerTask: 19, stepMsPerTask: [34.3, 15], rssAfterMiB: 168 }),
    ];
    const [cpu, rss] = freshTargets({ fresh: fresh({}, rounds) });
    expect(cpu?.measured).toBe("12.2 (9.1–19.0) ms (first 50: 22.8 ms)");
    expect(cpu).toMatchObject({ met: false, crosses: true, spread: "0.91–1.90" });
    expect(rss).toMatchObject({ met: true, crosses: false });
    expect(rss?.measured).toBe("176 (176–179) MB (before: 124 MB)");
    const failed = freshTargets({ fresh: fresh({}, [...rounds, round({ failed: 2 })]) });
    expect(failed.map((line) => line.met)).toEqual([null, null]);

    const out: { figures: unknown; tables?: Table[] } = {
      figures: {
        rounds: 5,
        tasksPerRound: 60,
        tasks: 10_000,
        setups: {},
        fresh: fresh({}, rounds),
      },
    };
    summarize(out, []);
    expect(out.tables?.[0]?.rows.map((row) => row.slice(0, 3))).toEqual([
      ["300 (round 1)", "12.2", "22.8, 9.0"],
      ["300 (round 2)", "9.1", "20.9, 8.0"],
      ["300 (round 3)", "19.0", "34.3, 15.0"],
      ["300 (median)", "12.2 (9.1–19.0)", "22.8, 9.0"],
    ]);
  });
});

describe("the three-replica target's control (the tasks phase's chat on both Redis setups)", () => {
  const spread = (median: number) => ({ median, min: median, max: median, n: 1 });
  const tasks = (figures: Record<string, unknown>) => {
    const lines = issueTargets({
      tasks: {
        figures: {
          setups: {
            "redis-1": { submissions: { cpuUsPerTask: spread(1036) } },
            "redis-3": { submissions: { cpuUsPerTask: spread(3367) } },
          },
          redis3VsRedis1: spread(3.25),
          ...figures,
        },
      },
    });
    return lines.find((line) => /3 replicas/.test(line.target));
  };

  it("prints what a chat costs on three replicas against one beside the target", () => {
    const line = tasks({ redis3VsRedis1Chat: spread(1.68) });
    expect(line?.measured).toBe(
      "3,367 µs vs 1,036 µs per task; a chat on the same replicas 1.68x one's (three processes on one core)",
    );
    expect(line?.met).toBe(false);
  });

  it("prints the task figures alone when the chat was not measured", () => {
    expect(tasks({ redis3VsRedis1Chat: null })?.measured).toBe("3,367 µs vs 1,036 µs per task");
  });
});
