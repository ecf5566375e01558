import { slow } from "../support/time-factor.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serve, writeConfig, type ServedProcess } from "../support/serve-process.js";
import {
  PNG_MAGIC,
  getTask,
  submitOk,
  waitForStatus,
  waitUntil,
  type Target,
} from "../tasks/task-api.js";

/*
 * The demo channel in each async dialect, end to end on the embedded defaults
 * (SQLite, the demo channel in the service's process): a task runs as a job of
 * the demo's, and a restart of the service resumes the poll instead of
 * submitting the generation again.
 */

const KEY = "sk-demo-async-test";
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "demo-async-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

type Dialect = "sub2api" | "bifrost" | "openai-background";

async function configFor(dialect: Dialect): Promise<string> {
  return writeConfig(dir, dialect, {
    server: { port: 0, host: "127.0.0.1" },
    store: { url: `sqlite://${join(dir, `${dialect}.db`)}` },
    auth: { keys: [{ key: KEY, group: "demo", name: "demo" }] },
    groups: { demo: { models: ["*"] } },
    channels: [
      {
        name: "demo",
        type: "demo",
        models: ["gpt-image-1"],
        // Long enough that a stop lands while the job runs.
        imageDelayMs: 12_000,
        async: dialect,
        pollSec: 1,
        ...(dialect === "openai-background" ? { responsesModel: "gpt-4.1-mini" } : {}),
      },
    ],
  });
}

/** A counter's value on the service's /metrics (0 when absent). */
async function counter(replica: ServedProcess, name: string, outcome: string): Promise<number> {
  const text = await (await fetch(`${replica.url}/metrics`)).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith(`image_task_sidecar_${name}{`) && l.includes(`outcome="${outcome}"`));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
}

const target = (replica: ServedProcess): Target => ({ url: replica.url, key: KEY });

describe.each([
  ["sub2api", "SIGTERM"],
  ["bifrost", "SIGKILL"],
  ["openai-background", "SIGTERM"],
] as const)("the demo channel with async: %s", (dialect, signal) => {
  it(
    `completes a task; after a ${signal} and a restart it polls the job on, never submits again`,
    async () => {
      const configFile = await configFor(dialect);
      const first = await serve(configFile, dir, { LOG_LEVEL: "info" });
      const id = await submitOk(target(first), {
        prompt: `a ${dialect} lighthouse`,
        size: "64x64",
        response_format: "url",
      });
      await waitUntil(
        async () => (await counter(first, "upstream_async_submissions_total", "accepted")) === 1,
        "the submission",
        20_000,
      );
      const before = await getTask(target(first), id);
      expect(before.body.status).toBe("in_progress");
      const stopped = Date.now();
      first.child.kill(signal);
      await first.exited;
      // A stop that only polls does not wait for the job (12 s) to finish: it hands it over.
      expect(Date.now() - stopped).toBeLessThan(10_000);
      if (signal === "SIGTERM") expect(first.stdout()).toContain('"msg":"task.handover"');

      const second = await serve(configFile, dir, { LOG_LEVEL: "info" });
      try {
        const done = await waitForStatus(target(second), id, ["completed", "failed"], 60_000);
        expect(done.body.status, done.text).toBe("completed");
        expect(done.body.started_at).toBe(before.body.started_at);
        const image = await fetch(done.body.data![0]!.url!);
        expect(Buffer.from(await image.arrayBuffer()).subarray(0, 8)).toEqual(PNG_MAGIC);
        expect(await counter(second, "upstream_async_submissions_total", "accepted")).toBe(0);
        expect(await counter(second, "upstream_async_polls_total", "completed")).toBe(1);
      } finally {
        second.child.kill("SIGTERM");
        await second.exited;
      }
    },
    slow(120_000),
  );
});
