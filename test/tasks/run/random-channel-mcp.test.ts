import { describe, expect, it } from "vitest";
import { slow } from "../../support/time-factor.js";
import { chaosApp, each, expectLogsClean, SEED, storyOf } from "./chaos-checks.js";
import { mcpClient, runMcpTask } from "./chaos-mcp.js";

/*
 * MCP clients against channels that answer at random (see chaos-channel.ts): each task started
 * with `generate_image` and collected with `check_image_task` over Streamable HTTP, as an agent
 * does. Whatever the channels do, every tool call answers (never a JSON-RPC error, never a hang
 * past the task's timeout); a task ends completed, its links fetching PNGs without a bearer, or
 * failed as a tool error that says why; a cancel answers; nothing secret reaches the client or
 * the log, nothing is logged as an error. Seeded: `TEST_RANDOM_SEED` runs another mix.
 */

const TASKS = 24;

// On the memory store: the stores meet these channels in the other random-channel files.
describe("random channel answers: MCP tools", () => {
  it(
    `every tool call answers, every task ends (seed ${SEED})`,
    { timeout: slow(90_000) },
    async () => {
      const { channel, app, lines } = await chaosApp({ storeUrl: "memory://" });
      const client = await mcpClient(app);
      const story = (n: number) => storyOf(channel.answers, n);
      const places = { start: client, check: client };
      const ends = await each(TASKS, story, (n) => runMcpTask(n, places, story));
      // The mix must hold both ends, or the seed tests little.
      expect(ends).toContain("completed");
      expect(ends).toContain("failed");
      expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
      expectLogsClean(lines);
    },
  );
});
