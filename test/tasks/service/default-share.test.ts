import { describe, expect, it } from "vitest";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { expectError, submit, submitOk, useApp, waitForStatus } from "../task-api.js";

describe.each([
  { store: "memory", redis: false },
  { store: "redis", redis: true },
])("the default per-key share of a small queue ($store)", ({ redis }) => {
  it("with maxQueued: 6 and no per-key setting, one key stops at half the queue and another still submits", async () => {
    const app = await useApp({
      redis,
      imageTasks: { maxConcurrent: 1, maxQueued: 6 },
      config: {
        groups: {
          default: { models: ["gpt-4o-mini", "gpt-image-*"] },
          vip: { models: ["*"], imageTasks: { maxQueuedPerKey: 5 } },
          chat: { models: ["gpt-4o-mini"] },
        },
      },
    });
    app.upstream.behave("images", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    const running = await submitOk(app, { prompt: "runs" });
    await arrived;
    await waitForStatus(app, running, ["in_progress"]);

    // Half of the six waiting places, then 429 for this key alone.
    for (let i = 0; i < 3; i++) await submitOk(app, { prompt: `a${i}` });
    const refused = await submit(app, { prompt: "a3" });
    expectError(refused, 429, "queue_full");
    expect(refused.body.error?.message).toMatch(/this key/i);

    // Another key of the same group still gets in, up to what is left of the queue.
    await submitOk(app, { prompt: "b0" }, { key: TEST_KEYS.other });
    await submitOk(app, { prompt: "b1" }, { key: TEST_KEYS.other });
    // A group's own share still counts (5 here), bounded by the whole queue (6 waiting now).
    await submitOk(app, { prompt: "v0" }, { key: TEST_KEYS.vip });
    const full = await submit(app, { prompt: "v1" }, { key: TEST_KEYS.vip });
    expectError(full, 429, "queue_full");
    expect(full.body.error?.message).not.toMatch(/this key/i);
  });
});
