import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { serve as serveProcess } from "../support/serve-process.js";
import { TEST_KEYS } from "../support/start-test-app.js";

const dir = mkdtempSync(join(tmpdir(), "sidecar-kill-"));
let upstream: FakeUpstream;

beforeAll(async () => {
  upstream = await startFakeUpstream();
});
afterAll(async () => {
  await upstream.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The bin in its own process, as an operator runs it; resolves once it listens. */
const serve = (configFile: string) => serveProcess(configFile, dir);

const auth = { authorization: `Bearer ${TEST_KEYS.default}` };

async function submit(url: string, prompt: string): Promise<string> {
  const res = await fetch(`${url}/v1/images/tasks`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ model: "gpt-image-1", prompt }),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

async function status(
  url: string,
  id: string,
): Promise<{ status: string; error?: { code: string } }> {
  const res = await fetch(`${url}/v1/images/tasks/${id}`, { headers: auth });
  expect(res.status).toBe(200);
  return (await res.json()) as { status: string; error?: { code: string } };
}

async function waitFor(url: string, id: string, wanted: string[]) {
  for (let i = 0; i < 400; i += 1) {
    const task = await status(url, id);
    if (wanted.includes(task.status)) return task;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`task ${id} never reached ${wanted.join("/")}`);
}

describe("SIGKILL with tasks queued and running, on the SQLite store", () => {
  it("loses no task: after a restart every task ends, none stays queued or in progress", async () => {
    const configFile = join(dir, "config.yaml");
    writeFileSync(
      configFile,
      [
        "server: { port: 0, host: 127.0.0.1 }",
        `store: { url: "sqlite://${join(dir, "kill.db")}" }`,
        `auth: { keys: [{ key: ${TEST_KEYS.default}, group: default }] }`,
        'groups: { default: { models: ["gpt-image-*"] } }',
        `channels: [{ name: fake, baseUrl: "${upstream.baseUrl}", models: ["gpt-image-1"] }]`,
        "imageTasks: { maxConcurrent: 1, pollIntervalSec: 1 }",
        "",
      ].join("\n"),
    );
    upstream.behave("images", { kind: "hang" });
    const first = await serve(configFile);
    const ids = [];
    for (const prompt of ["one", "two", "three"]) ids.push(await submit(first.url, prompt));
    await waitFor(first.url, ids[0] as string, ["in_progress"]);
    expect((await status(first.url, ids[1] as string)).status).toBe("queued");

    first.child.kill("SIGKILL");
    await new Promise((r) => first.child.once("exit", r));

    upstream.behave("images", { kind: "ok" });
    const second = await serve(configFile);
    for (const id of ids) {
      const task = await waitFor(second.url, id, ["completed", "failed"]);
      // The interrupted one runs again; the queued ones run in turn.
      expect(task.status).toBe("completed");
    }
    second.child.kill("SIGTERM");
    expect(await new Promise((r) => second.child.once("exit", r))).toBe(0);
  });
});
