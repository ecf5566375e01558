import { slow } from "../../support/time-factor.js";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { serve as serveProcess } from "../../support/serve-process.js";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { startWebhookReceiver, type WebhookReceiver } from "../../webhooks/webhook-receiver.js";
import { upstreamPrompts } from "../task-api.js";

// The real bin on a SQLite file, killed with SIGKILL at random instants while it takes
// submissions, runs tasks, finishes them and delivers their webhooks. After every restart each
// task answered 202 is there; in the end each is finished, none ran again once finished, and
// each finished task with a webhook had its event delivered.

const ROUNDS = 12;
const SUBMITTERS = 4;
/** Submissions per submitter and round: the queue stays short, so the runs keep up. */
const PER_SUBMITTER = 10;
const auth = { authorization: `Bearer ${TEST_KEYS.default}` };
const dir = mkdtempSync(join(tmpdir(), "sidecar-crash-"));
let upstream: FakeUpstream;
let receiver: WebhookReceiver;

beforeAll(async () => {
  upstream = await startFakeUpstream();
  receiver = await startWebhookReceiver();
});
afterAll(async () => {
  await Promise.all([upstream.close(), receiver.close()]);
  rmSync(dir, { recursive: true, force: true });
});

/** The bin in its own process, as an operator runs it; resolves once it listens. */
const serve = (configFile: string) => serveProcess(configFile, dir);

async function kill(child: ChildProcess) {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
  }
}

interface Submitted {
  id: string;
  prompt: string;
  webhook: boolean;
}

/**
 * Submits (at most {@link PER_SUBMITTER}, a little apart) until the service goes away; what
 * was answered 202 goes into `accepted`.
 */
async function submitUntilGone(url: string, accepted: Submitted[], next: () => number) {
  for (let i = 0; i < PER_SUBMITTER; i += 1) {
    await new Promise((r) => setTimeout(r, 5 + Math.random() * 20));
    const n = next();
    const prompt = `crash-${n}`;
    const webhook = n % 2 === 0;
    const body = {
      model: "gpt-image-1",
      prompt,
      ...(webhook ? { webhook_url: `${receiver.url}/hook` } : {}),
    };
    let res: Response;
    try {
      res = await fetch(`${url}/v1/images/tasks`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    } catch {
      return; // killed: this one's answer never came
    }
    const text = await res.text().catch(() => undefined);
    if (text === undefined) return;
    expect(res.status, text).toBe(202);
    accepted.push({ id: (JSON.parse(text) as { id: string }).id, prompt, webhook });
  }
}

async function statusOf(url: string, id: string): Promise<string> {
  const res = await fetch(`${url}/v1/images/tasks/${id}`, { headers: auth });
  const text = await res.text();
  expect(res.status, `${id}: ${text}`).toBe(200);
  return (JSON.parse(text) as { status: string }).status;
}

describe("SIGKILL at random instants on the SQLite store", () => {
  it(
    "loses no accepted task or webhook event, leaves none unfinished, runs none again",
    async () => {
      const configFile = join(dir, "config.yaml");
      writeFileSync(
        configFile,
        [
          "server: { port: 0, host: 127.0.0.1 }",
          `store: { url: "sqlite://${join(dir, "crash.db")}" }`,
          `auth: { keys: [{ key: ${TEST_KEYS.default}, group: default }] }`,
          'groups: { default: { models: ["gpt-image-*"] } }',
          `channels: [{ name: fake, baseUrl: "${upstream.baseUrl}", models: ["gpt-image-1"] }]`,
          // Room for every task a loaded machine leaves queued across the rounds.
          "imageTasks: { maxConcurrent: 4, pollIntervalSec: 1, maxAttempts: 3, maxQueued: 10000, maxQueuedPerKey: 10000 }",
          `webhooks: { secret: "whsec_${Buffer.alloc(32, 9).toString("base64")}", allowPrivateNetworks: true, retryScheduleSec: [1], maxAttempts: 50 }`,
          "",
        ].join("\n"),
      );
      upstream.behave("images", { kind: "ok", delayMs: 15 });
      const accepted: Submitted[] = [];
      /** Upstream calls for each task's prompt when it was first seen finished. */
      const callsWhenFinished = new Map<string, number>();
      const calls = (prompt: string) =>
        upstreamPrompts(upstream).filter((p) => p === prompt).length;
      let counter = 0;

      /** Every accepted task is there; note the finished ones. Resolves how many are unfinished. */
      async function audit(url: string): Promise<number> {
        let unfinished = 0;
        for (const task of accepted) {
          const status = await statusOf(url, task.id);
          if (status !== "completed" && status !== "failed") unfinished += 1;
          else if (!callsWhenFinished.has(task.id))
            callsWhenFinished.set(task.id, calls(task.prompt));
        }
        return unfinished;
      }

      for (let round = 0; round < ROUNDS; round += 1) {
        const { child, url } = await serve(configFile);
        await audit(url);
        const submitters = Array.from({ length: SUBMITTERS }, () =>
          submitUntilGone(url, accepted, () => (counter += 1)),
        );
        await new Promise((r) => setTimeout(r, 20 + Math.random() * 600));
        await kill(child);
        await Promise.all(submitters);
      }

      const { child, url } = await serve(configFile);
      for (let i = 0; (await audit(url)) > 0; i += 1) {
        if (i > 300) throw new Error("tasks stayed unfinished after the last restart");
        await new Promise((r) => setTimeout(r, 100));
      }
      const hooked = accepted.filter((task) => task.webhook).map((task) => task.id);
      const delivered = () =>
        new Set(
          receiver.requests.map(
            (request) => (JSON.parse(request.body) as { data: { id: string } }).data.id,
          ),
        );
      for (let i = 0; hooked.some((id) => !delivered().has(id)); i += 1) {
        if (i > 300) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await kill(child);

      expect(accepted.length).toBeGreaterThan(ROUNDS);
      expect(hooked.filter((id) => !delivered().has(id))).toEqual([]);
      const ranAgain = accepted.filter(
        (task) => calls(task.prompt) !== callsWhenFinished.get(task.id),
      );
      expect(ranAgain).toEqual([]);
    },
    slow(90_000),
  );
});
