import { leaseSec, slow } from "../../support/time-factor.js";
import { rm } from "node:fs/promises";
import { expect, onTestFinished } from "vitest";
import type { FakeUpstream } from "../../support/fake-upstream.js";
import { imagesDirOf } from "../../support/redis.js";
import { startTestApp, type TestApp } from "../../support/start-test-app.js";
import { submit, upstreamPrompts, waitForStatus, waitUntil, type Target } from "../task-api.js";

/*
 * What the failover tests share: service replicas (in this process, each with
 * its own clients) on one Redis deployment, a stream of submissions from
 * several clients spread over them, and the checks a user would make after a
 * Redis primary died under that stream.
 */

/** `store.commandTimeoutSec` of the replicas: no answer may wait much past it. */
export const COMMAND_TIMEOUT_SEC = 2;

/** Starts `count` replicas of one deployment on `store` (its `url` and `prefix`). */
export async function startReplicaApps(options: {
  upstream: FakeUpstream;
  store: Record<string, unknown> & { url: string; prefix: string };
  count?: number;
  config?: Record<string, unknown>;
  /** Over the replicas' own (4 tasks at a time, a 2 s lease). */
  imageTasks?: { maxConcurrent?: number };
}): Promise<TestApp[]> {
  const { prefix } = options.store;
  onTestFinished(() => rm(imagesDirOf(prefix), { recursive: true, force: true }));
  const apps: TestApp[] = [];
  for (let i = 0; i < (options.count ?? 2); i += 1) {
    const app = await startTestApp({
      upstream: options.upstream,
      imageTasks: { maxConcurrent: 4, leaseSec: leaseSec(2), ...options.imageTasks },
      config: {
        store: { commandTimeoutSec: COMMAND_TIMEOUT_SEC, ...options.store },
        images: { url: `file://${imagesDirOf(prefix)}` },
        ...options.config,
      },
    });
    onTestFinished(() => app.close());
    apps.push(app);
  }
  return apps;
}

/** One submission of the stream, as its client saw it. */
export interface Answer {
  status: number;
  code: string | undefined;
  id: string | undefined;
  replica: number;
  sentAt: number;
  answeredAt: number;
}

/** Submissions, `clients` at a time, spread over `targets`, until stopped (bounded anyway). */
export function startSubmissions(targets: Target[], clients: number) {
  const answers: Answer[] = [];
  let stopped = false;
  const loops = Array.from({ length: clients }, async (_, client) => {
    // At most 300 each and 90 s: the stream always ends, whatever the test does.
    const until = Date.now() + 90_000;
    for (let n = 0; n < 300 && !stopped && Date.now() < until; n += 1) {
      const replica = (client + n) % targets.length;
      const sentAt = Date.now();
      const response = await submit(targets[replica]!, { prompt: `client ${client} #${n}` });
      answers.push({
        status: response.status,
        code:
          response.status === 202
            ? undefined
            : (response.body as { error?: { code?: string } }).error?.code,
        id: response.status === 202 ? response.body.id : undefined,
        replica,
        sentAt,
        answeredAt: Date.now(),
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
  return {
    answers,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/**
 * Runs the stream over `apps`, kills the primary with `kill` once tasks flow,
 * waits for the deployment's `failover`, then until every replica accepted a
 * submission again; resolves the answers and when the kill happened.
 */
export async function submitThroughFailover(
  apps: TestApp[],
  kill: () => Promise<unknown>,
  failover: () => Promise<unknown>,
): Promise<{ answers: Answer[]; killedAt: number }> {
  const stream = startSubmissions(apps, 4);
  try {
    await waitUntil(
      () => stream.answers.filter((a) => a.status === 202).length >= 8,
      "submissions to flow before the kill",
      20_000,
    );
    await kill();
    const killedAt = Date.now();
    await failover();
    const failedOverAt = Date.now();
    await waitUntil(
      () =>
        apps.every((_, replica) =>
          stream.answers.some(
            (a) => a.replica === replica && a.status === 202 && a.sentAt > failedOverAt,
          ),
        ),
      "every replica to accept submissions again, without a restart",
      30_000,
    );
    await stream.stop();
    return { answers: stream.answers, killedAt };
  } finally {
    await stream.stop();
  }
}

/**
 * What a user must see after the failover: no answer but 202 or 503
 * `store_unavailable`, none slower than the command timeout allows, every
 * 202 completed; prints how long after the kill a submission was accepted.
 */
export async function expectNothingLost(
  apps: TestApp[],
  { answers, killedAt }: { answers: Answer[]; killedAt: number },
  label: string,
): Promise<void> {
  const refusals = answers.filter((a) => a.status !== 202).map((a) => `${a.status} ${a.code}`);
  expect(new Set(refusals)).toEqual(new Set(refusals.length ? ["503 store_unavailable"] : []));
  const slowest = Math.max(...answers.map((a) => a.answeredAt - a.sentAt));
  // The deadline, its check and a loaded machine: never an open-ended hang.
  expect(slowest).toBeLessThan(slow(COMMAND_TIMEOUT_SEC * 1000 * 4 + 3_000));
  const firstAccepted = answers
    .filter((a) => a.status === 202 && a.sentAt >= killedAt)
    .reduce((first, a) => Math.min(first, a.answeredAt), Infinity);
  const refused = answers.filter((a) => a.status === 503).length;
  const accepted = answers.filter((a) => a.status === 202);
  console.log(
    `${label}: first submission accepted ${firstAccepted - killedAt} ms after the kill ` +
      `(${accepted.length} accepted, ${refused} answered 503 meanwhile)`,
  );
  for (const [index, answer] of accepted.entries()) {
    // Polled on the other replica than the one that answered 202.
    const other = apps[(answer.replica + 1) % apps.length]!;
    const done = await waitForStatus(
      other,
      answer.id!,
      ["completed", "failed"],
      index === 0 ? 60_000 : 30_000,
    );
    expect(done.body.status, done.text).toBe("completed");
  }
}

/**
 * No submission of the stream reached the channel twice: a run whose image
 * came back while the primary was dying keeps it (its completion is written
 * once the new primary answers), where the queue used to run the task again,
 * paying for the image twice.
 */
export function expectEachGeneratedOnce(upstream: FakeUpstream): void {
  const prompts = upstreamPrompts(upstream).filter((prompt) =>
    /^client \d+ #\d+$/.test(prompt ?? ""),
  );
  expect(prompts.filter((prompt, at) => prompts.indexOf(prompt) !== at)).toEqual([]);
}

/**
 * The metrics of each replica name `primary` and a switch (the primary is
 * shown there only, never on `/readyz`), and the replica answers `/readyz`.
 */
export async function expectSwitchSeen(apps: TestApp[], primary: string): Promise<void> {
  for (const app of apps) {
    await waitUntil(
      async () => {
        const metrics = await (await fetch(`${app.url}/metrics`)).text();
        return (
          new RegExp(`redis_primary_info\\{address="${primary}"\\} 1`).test(metrics) &&
          /redis_switches_total [1-9]/.test(metrics)
        );
      },
      `the metrics of ${app.url} to name ${primary} as primary after a switch`,
      15_000,
    );
    const ready = await fetch(`${app.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.text()).not.toContain(primary);
    const metrics = await (await fetch(`${app.url}/metrics`)).text();
    expect(metrics).toMatch(/redis_last_switch_timestamp_seconds [1-9]/);
  }
}
