import { join } from "node:path";
import type { TestAppOptions } from "../support/start-test-app.js";
import { useTempDir } from "./task-api.js";

/**
 * Every store a test app can run on, as options for `useApp`: memory, a
 * SQLite file of the test's own, and the shared Redis under a fresh prefix
 * (deleted when the app closes). For `describe.each`.
 */
export const STORES: Array<{ name: string; options: () => Promise<TestAppOptions> }> = [
  { name: "memory", options: async () => ({ storeUrl: "memory://" }) },
  {
    name: "sqlite",
    options: async () => ({ storeUrl: `sqlite://${join(await useTempDir(), "tasks.db")}` }),
  },
  { name: "redis", options: async () => ({ redis: true }) },
];
