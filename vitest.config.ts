import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: suites start real servers and a real Redis; more forks only add contention.
    maxWorkers: 2,
  },
});
