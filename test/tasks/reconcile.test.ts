import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createChannel } from "../../src/channels/channel.js";
import { createChannelRegistry } from "../../src/channels/channel-registry.js";
import { createMetrics } from "../../src/metrics/create-metrics.js";
import { createModelAccess } from "../../src/models/model-access.js";
import { createTaskStore } from "../../src/tasks/store/create-task-store.js";
import { createInProcessQueue } from "../../src/tasks/task-queue.js";
import { newTaskId, type TaskRecord } from "../../src/tasks/task-record.js";
import { createTaskService } from "../../src/tasks/task-service.js";
import type { TaskStore } from "../../src/tasks/task-store.js";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { testConfig } from "../support/start-test-app.js";

let upstream: FakeUpstream;
let store: TaskStore;
afterEach(async () => {
  await store?.close();
  await upstream?.close();
});

async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 400; i += 1) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("condition never held");
}

// A store write that failed after the task was saved (or a lost queue entry)
// must not leave a task queued or in progress for ever: the periodic reconcile
// pass finds such tasks in the store and runs them.
describe("reconcile", () => {
  it("runs a stored task the queue never heard of, and re-runs an orphaned in-progress one", async () => {
    upstream = await startFakeUpstream();
    const config = testConfig(upstream.baseUrl);
    const logger = pino({ level: "silent" });
    store = await createTaskStore(config, logger);
    const queue = createInProcessQueue({ maxConcurrent: 2 });
    const registry = createChannelRegistry({
      channels: config.channels.map((c) => createChannel({ ...c, baseUrl: c.baseUrl! })),
      logger,
    });
    const service = createTaskService({
      config,
      store,
      queue,
      registry,
      access: createModelAccess({ groups: config.groups, registry }),
      metrics: createMetrics({ defaultMetrics: false }),
      logger,
    });
    queue.start(service.run);

    const record = (prompt: string): TaskRecord => ({
      id: newTaskId(),
      owner: "key:someone",
      status: "queued",
      model: "gpt-image-1",
      request: { model: "gpt-image-1", prompt },
      responseFormat: "b64_json",
      created: Math.floor(Date.now() / 1000),
      attempts: 0,
    });
    const lostInQueue = record("never enqueued");
    const orphaned = record("left in progress");
    await store.create(lostInQueue);
    await store.create(orphaned);
    await store.transition(orphaned.id, "queued", { status: "in_progress", attempts: 1 });

    await service.reconcile();
    await until(
      async () =>
        (await store.get(lostInQueue.id))?.status === "completed" &&
        (await store.get(orphaned.id))?.status === "completed",
    );
    expect((await store.get(orphaned.id))?.attempts).toBe(2);
    expect(await store.listUnfinished()).toEqual([]);
    await service.stop(100);
  });
});
