import { defineConfig } from "vitest/config";

/** Files that replace modules with `vi.mock`: they need a fresh module graph of their own. */
const MOCKING = ["test/demo/demo-channel-abort.test.ts"];
/**
 * Tests of what other programs do under the service, the same whatever Node runs it: real Redis
 * Sentinel sets and Clusters failing over, Ceph's S3 gateway, Chromium driving the console,
 * kustomize and promtool on the manifests. CI runs them once, on its first pass, and sets
 * SKIP_TOOL_TESTS on the second (Node 22).
 */
const TOOLS = process.env.SKIP_TOOL_TESTS
  ? [
      "test/tasks/failover/**",
      "test/images/*ceph*.test.ts",
      "test/images/image-store-startup-checks.test.ts",
      "test/support/ceph-rgw.test.ts",
      "test/console/console-ui.test.ts",
      "test/deploy/**",
    ]
  : [];

export default defineConfig({
  test: {
    // As the service's entries (main.ts, cli.ts) set it: tests start the service in-process.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The suite mostly waits (on real servers, Redis, Ceph, a browser, timers): four forks on two
    // cores use about 1.3 of them and take 3 minutes where two took 4.5.
    maxWorkers: 4,
    projects: [
      {
        extends: true,
        // Every test owns its ports, keys and directories and builds its app through
        // factories (nothing happens on import), so files can share a worker's module
        // graph; re-importing express, the SDKs and prom-client per file cost a third of the run.
        test: {
          name: "shared",
          include: ["test/**/*.test.ts"],
          exclude: [...MOCKING, ...TOOLS],
          isolate: false,
        },
      },
      { extends: true, test: { name: "isolated", include: MOCKING } },
    ],
  },
});
