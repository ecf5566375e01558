import { afterAll, beforeAll, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY, type TestAppOptions } from "../../support/start-test-app.js";
import { startFakeAsyncChannel, type FakeAsyncChannel } from "../async/fake-async-channel.js";
import { submitOk, waitForStatus } from "../task-api.js";

/*
 * More than ten runs at once (imageTasks.maxConcurrent 16): each run listens to signals its
 * queue shares between runs (the drain's, a stop's grace running out), and Node warns on stderr
 * past ten listeners on one signal ("MaxListenersExceededWarning: Possible EventTarget memory
 * leak detected"), which reads as a leak in an operator's logs. Each run removes its own
 * listener when it ends: the queue's signals take any number.
 */

const RUNS = 16;

let upstream: FakeUpstream;
let asyncChannel: FakeAsyncChannel;
beforeAll(async () => {
  [upstream, asyncChannel] = await Promise.all([startFakeUpstream(), startFakeAsyncChannel()]);
});
afterAll(() => Promise.all([upstream?.close(), asyncChannel?.close()]));

/** Runs RUNS tasks at once on a service with `options`; the process warnings seen meanwhile. */
async function warningsOf(options: TestAppOptions): Promise<string[]> {
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
  process.on("warning", onWarning);
  onTestFinished(() => {
    process.off("warning", onWarning);
  });
  const app = await startTestApp({
    upstream,
    ...options,
    imageTasks: { maxConcurrent: RUNS, ...options.imageTasks },
  });
  onTestFinished(() => app.close());
  const ids = await Promise.all(
    Array.from({ length: RUNS }, (_, n) => submitOk(app, { prompt: `run ${n}` })),
  );
  await Promise.all(ids.map((id) => waitForStatus(app, id, ["completed"])));
  await app.close();
  return warnings;
}

it(`${RUNS} runs at once on Redis: no listener warning`, async () => {
  upstream.behave("images", { kind: "ok", delayMs: 1_000 });
  // A prefix and image directory of the app's own, deleted when it closes.
  const warnings = await warningsOf({ redis: true });
  expect(warnings).toEqual([]);
});

it(`${RUNS} runs at once on an async channel: no listener warning`, async () => {
  asyncChannel.behave({ finishAfterMs: 1_000 });
  const warnings = await warningsOf({
    imageTasks: { timeoutSec: 60 },
    config: {
      channels: [
        {
          name: "jobs",
          baseUrl: asyncChannel.baseUrl,
          apiKey: UPSTREAM_KEY,
          models: ["gpt-image-1"],
          async: "sub2api",
          pollSec: 1,
        },
      ],
    },
  });
  expect(asyncChannel.jobs).toHaveLength(RUNS);
  expect(warnings).toEqual([]);
});
