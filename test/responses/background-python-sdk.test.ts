import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { RESPONSE_ID_PATTERN } from "../../src/contract/task-contract.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";
import { responseCalls } from "./response-helpers.js";
import { scriptChannel } from "./scripted-channel.js";

/*
 * Background responses through the official `openai` Python SDK, unchanged:
 * create, retrieve, a resumed stream, cancel and delete, as a Python agent
 * uses them. The SDK lives in a virtual environment that
 * scripts/ensure-test-tools.sh makes before `npm test` (PYTHON_OPENAI names
 * another Python that has it).
 */

const SCRIPT = join(import.meta.dirname, "python", "background_sdk.py");

function python(): string {
  const cache = process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache");
  const found =
    process.env.PYTHON_OPENAI ?? join(cache, "image-task-sidecar-test/python/bin/python");
  if (!existsSync(found)) {
    throw new Error(
      `no Python with the openai package at ${found}: run scripts/ensure-test-tools.sh (npm test does)`,
    );
  }
  return found;
}

/** What the script prints (see background_sdk.py). */
interface Seen {
  created: { status: string; background: boolean; id: string };
  done: Record<string, unknown>;
  events: Array<[string, number]>;
  deleted: unknown;
  after_delete: unknown;
  cancelled: { status: string; id: string; created: string };
}

/** Runs the script's `mode` against `app`; resolves with what it printed. */
function runScript(app: TestApp, mode: "complete" | "cancel"): Promise<Seen> {
  return new Promise((resolve, reject) => {
    execFile(
      python(),
      [SCRIPT, mode],
      {
        timeout: 60_000,
        // Only what the SDK reads: no proxy or OpenAI setting of the machine's.
        env: {
          PATH: process.env.PATH ?? "",
          OPENAI_BASE_URL: `${app.url}/v1`,
          OPENAI_API_KEY: app.key,
        },
      },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout) as Seen);
      },
    );
  });
}

describe("background responses through the openai Python SDK", () => {
  it("creates, retrieves, resumes a stream after event 2, and deletes, as OpenAI's API answers", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    scriptChannel(app.upstream, { usage: { input_tokens: 12, output_tokens: 5 } });

    const seen = await runScript(app, "complete");

    expect(seen.created).toMatchObject({ status: "queued", background: true });
    expect(seen.created.id).toMatch(RESPONSE_ID_PATTERN);
    expect(seen.done).toEqual({
      status: "completed",
      id: seen.created.id,
      output_text: "Hello from the scripted channel!",
      usage: expect.objectContaining({ input_tokens: 12, output_tokens: 5 }),
    });
    const { events } = seen;
    // Resumed after event 2: numbered on from 3, in order, to the response's end.
    expect(events[0]?.[1]).toBe(3);
    expect(events.map(([, n]) => n)).toEqual(events.map((_, i) => i + 3));
    expect(events.at(-1)?.[0]).toBe("response.completed");
    expect(events.map(([type]) => type)).toContain("response.output_text.delta");
    expect(seen.deleted).toBeNull();
    expect(seen.after_delete).toBe(404);
    // One call at the channel, streamed, never with `background`.
    expect(responseCalls(app).map((call) => (call.body as { stream?: unknown }).stream)).toEqual([
      true,
    ]);
  });

  it("cancels a response in progress: the SDK gets it cancelled, and the channel's call is cut", async () => {
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const channel = scriptChannel(app.upstream, { hold: true });
    onTestFinished(() => channel.release());

    const seen = await runScript(app, "cancel");

    expect(seen.cancelled).toEqual({
      status: "cancelled",
      id: seen.cancelled.created,
      created: seen.cancelled.created,
    });
    await expect.poll(() => channel.aborted, { timeout: 10_000 }).toBe(1);
  });
});
