import { describe, expect, it } from "vitest";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { listKeys } from "../../support/redis.js";
import {
  cancelTask,
  expectError,
  getTask,
  submit,
  submitOk,
  useApp,
  waitForStatus,
  type ApiResponse,
} from "../task-api.js";

const GROUPS = {
  default: { models: ["gpt-4o-mini", "gpt-image-*"] },
  vip: { models: ["*"], imageTasks: { maxQueuedPerKey: 4, maxRetainedPerKey: 50 } },
  chat: { models: ["gpt-4o-mini"] },
};

describe.each([
  { store: "memory", redis: false },
  { store: "redis", redis: true },
])("one key's share of the queue and the store ($store)", ({ redis }) => {
  it("one key cannot fill the queue for everyone; its group may give it more", async () => {
    const app = await useApp({
      redis,
      imageTasks: { maxConcurrent: 1, maxQueued: 6, maxQueuedPerKey: 2 },
      config: { groups: GROUPS },
    });
    app.upstream.behave("images", { kind: "hang" });
    const arrived = app.upstream.nextRequest("images");
    const running = await submitOk(app, { prompt: "runs" });
    await arrived;
    await waitForStatus(app, running, ["in_progress"]);

    // The key's two waiting places, then 429 for it alone.
    await submitOk(app, { prompt: "a1" });
    await submitOk(app, { prompt: "a2" });
    const refused = await submit(app, { prompt: "a3" });
    expectError(refused, 429, "queue_full");
    expect(refused.body.error?.message).toMatch(/this key/i);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);

    // Another key still gets in; a key of a group with a bigger share, further.
    await submitOk(app, { prompt: "b1" }, { key: TEST_KEYS.other });
    const vip: ApiResponse[] = [];
    for (let i = 0; i < 4; i++) {
      vip.push(await submit(app, { prompt: `v${i}` }, { key: TEST_KEYS.vip }));
    }
    expect(vip.map((answer) => answer.status)).toEqual([202, 202, 202, 429]);
    // The whole queue (6 waiting) is full for everyone now.
    expectError(vip[3]!, 429, "queue_full");
    expect(vip[3]!.body.error?.message).not.toMatch(/this key/i);
  });

  it("submitting and cancelling cannot grow the store: the key's retained tasks are bounded", async () => {
    const app = await useApp({
      redis,
      imageTasks: { maxConcurrent: 1, maxRetainedPerKey: 3 },
      config: { groups: GROUPS },
    });
    app.upstream.behave("images", { kind: "hang" });
    const statuses: number[] = [];
    const kept: string[] = [];
    for (let i = 0; i < 8; i++) {
      const answer = await submit(app, { prompt: `churn ${i}`, background: "x".repeat(32) });
      statuses.push(answer.status);
      if (answer.status === 202) {
        kept.push(answer.body.id);
        expect((await cancelTask(app, answer.body.id)).body.status).toBe("failed");
      } else {
        expectError(answer, 429, "too_many_tasks");
        expect(answer.body.error?.message).toMatch(/expire/);
      }
    }
    expect(statuses).toEqual([202, 202, 202, 429, 429, 429, 429, 429]);
    // Its cancelled tasks are still there to read; another key is not affected.
    for (const id of kept) expect((await getTask(app, id)).body.status).toBe("failed");
    await submitOk(app, { prompt: "someone else" }, { key: TEST_KEYS.other });
    if (redis) {
      const prefix = app.config.store.prefix;
      const records = (await listKeys(prefix)).filter((key) => key.includes("::task:"));
      expect(records).toHaveLength(4);
    }
  });
});

describe("every string field of a task has a length limit", () => {
  it.each([
    ["model", 101],
    ["quality", 33],
    ["style", 33],
    ["background", 33],
    ["output_format", 33],
    ["moderation", 33],
    ["user", 257],
  ])("%s longer than its limit is 400 invalid_value naming it", async (field, length) => {
    const app = await useApp();
    const answer = await submit(app, { prompt: "x", [field]: "a".repeat(length) });
    expectError(answer, 400, "invalid_value", field);
    expect(answer.text.length).toBeLessThan(1000);
  });

  it("a 100 KB background (within the body limit) is refused, not kept", async () => {
    const app = await useApp();
    expectError(
      await submit(app, { prompt: "x", background: "b".repeat(100 * 1024) }),
      400,
      "invalid_value",
      "background",
    );
  });
});
