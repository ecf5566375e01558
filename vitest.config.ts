import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { slow } from "./test/support/time-factor.js";

/** Files that replace modules with `vi.mock`: they need a fresh module graph of their own. */
const MOCKING = ["test/demo/demo-channel-abort.test.ts"];
/**
 * Test files that start real processes: the service's bin (replicas, crashes, signals, the CLI),
 * private `redis-server`s, Chromium. Each spends whole seconds of CPU at once; several at a time
 * on two cores starve each other past their deadlines and leases. They run two at a time at most
 * (test/support/process-slots.ts; TEST_PROCESS_SLOTS, and CI, where they mostly wait, runs
 * three). Vitest hands out one project's files after another, so in one run the in-process files
 * start only once every one of these is handed out; CI runs this project in a vitest run of its
 * own beside the others (.ci/run).
 */
const PROCESS_MARKERS = [
  "support/serve-process.js",
  "replica-cluster.js",
  "node:child_process",
  "startPrivateRedis",
  "redis-topology",
  "frozen-replicas.js",
  "console-browser.js",
  "ceph-rgw.js",
];
/** Before each file: the time factor follows the load then (test/support/time-factor.ts). */
const TIME_FACTOR_SETUP = "test/support/time-factor-setup.ts";
/** Each in-process file's CPU, when TEST_CPU_LOG names a file (CI prints the costliest). */
const FILE_CPU_LOG = "test/support/file-cpu-log.ts";

const PROCESSES = testFiles("test").filter((file) => {
  const text = readFileSync(file, "utf8");
  return !MOCKING.includes(file) && PROCESS_MARKERS.some((marker) => text.includes(marker));
});

/**
 * The multi-process files that hold their slots longest (CI's slot log, `TEST_SLOT_LOG`), handed
 * out first, longest first: vitest hands out files it has no times for largest first, and a
 * minute-long file handed out last (it waited 38 s for a slot, then held it 114 s) ended the run
 * alone. The Sentinel failover files are not among them: at the start of CI's run the machine is
 * at its busiest, and a command deadline of theirs (2 s) once ran out there. Any other file
 * follows in vitest's order; a name no longer here is simply not matched.
 */
const HANDED_OUT_FIRST = [
  "test/tasks/replicas/rollout-drain.test.ts",
  "test/console/console-ui.test.ts",
  "test/console/console-ui-again.test.ts",
  "test/redis/redis-pause-quiet.test.ts",
  "test/console/console-ui-viewer.test.ts",
  "test/tasks/store/sqlite-crash.test.ts",
  "test/tasks/replicas/rollout-async.test.ts",
  "test/console/console-ui-gallery.test.ts",
  "test/tasks/replicas/run-end-through-outage.test.ts",
  "test/demo/demo-async-service.test.ts",
  "test/images/image-store-startup-checks.test.ts",
  "test/tasks/replicas/replicas-outages.test.ts",
  "test/tasks/replicas/replicas-cluster.test.ts",
];

/**
 * The in-process files that take longest, handed out first for the same reason: most of their
 * time is waiting (a lease running out, a task's poll interval, a flood's seconds), which a
 * loaded machine stretches (the lapsed-lease cases took about 3 minutes in CI, the longest file).
 * The start of CI's run is its busiest moment: a file here must stretch every deadline it sets
 * (`channels/failure-modes`, whose channel timeouts were 1 s flat, failed there once).
 */
const IN_PROCESS_FIRST = [
  "test/tasks/run/lease-lapsed-replicas.test.ts",
  "test/tasks/run/lease-lapsed-mid-run.test.ts",
  "test/deploy/kubernetes-render.test.ts",
  "test/tasks/async/submit-poll.test.ts",
  "test/deploy/kubernetes-operations.test.ts",
];
const FIRST = [...HANDED_OUT_FIRST, ...IN_PROCESS_FIRST];

/** Vitest's order, with {@link FIRST} moved to the front. */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (spec: TestSpecification) => {
      const at = FIRST.indexOf(relative(".", spec.moduleId));
      return at === -1 ? FIRST.length : at;
    };
    // Array.prototype.sort is stable: the rest keep vitest's order.
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return entry.name.endsWith(".test.ts") ? [relative(".", path)] : [];
  });
}

export default defineConfig({
  test: {
    // As the service's entries (main.ts, cli.ts) set it: tests start the service in-process.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
    // Stretched on a loaded machine (TEST_TIME_FACTOR, or the load average: test/support/time-factor.ts).
    testTimeout: slow(30_000),
    hookTimeout: slow(30_000),
    sequence: { sequencer: LongestFirst },
    // The suite mostly waits (on real servers, Redis, Ceph, a browser, timers): four forks on two
    // cores, of which two at most run files that start processes (TEST_PROCESS_SLOTS: CI runs
    // three in a vitest run of their own). Vitest 4.1's `--maxWorkers` flag does not reach
    // projects (vitest#11051): this is the one that counts.
    maxWorkers: 4,
    // Transformed modules kept on disk (node_modules/.experimental-vitest-cache, keyed by each
    // module's path and content and the lockfile, so a clone elsewhere starts cold): CI's later runs (Node 22's, test/cli) and a developer's reruns read them
    // instead of transforming again, about 15 % of the in-process suite's CPU.
    experimental: { fsModuleCache: true },
    projects: [
      {
        extends: true,
        // Every test owns its ports, keys and directories and builds its app through
        // factories (nothing happens on import), so files can share a worker's module
        // graph; re-importing express, the SDKs and prom-client per file cost a third of the run.
        test: {
          name: "shared",
          include: ["test/**/*.test.ts"],
          exclude: [...MOCKING, ...PROCESSES],
          isolate: false,
          setupFiles: [TIME_FACTOR_SETUP, FILE_CPU_LOG],
        },
      },
      {
        extends: true,
        test: {
          name: "processes",
          include: PROCESSES,
          isolate: false,
          setupFiles: [TIME_FACTOR_SETUP, "test/support/process-slots.ts"],
        },
      },
      {
        extends: true,
        test: { name: "isolated", include: MOCKING, setupFiles: [TIME_FACTOR_SETUP, FILE_CPU_LOG] },
      },
    ],
  },
});
