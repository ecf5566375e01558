import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { openTaskBackend } from "../../src/tasks/open-task-backend.js";
import { newTaskId, type TaskRecord } from "../../src/tasks/core/task-record.js";
import { TEST_KEYS, startTestApp, testConfig } from "../support/start-test-app.js";
import { call, useTempDir, waitForStatus } from "./task-api.js";

// A store write that failed after the task was saved (or a process that died
// between its writes) must not leave a task queued or in progress for ever:
// the service adopts every unfinished task it finds in the store, and a task
// left in progress by a run that no longer holds it is run again.
describe("adopting what the store holds unfinished", () => {
  it("runs a stored task the queue never heard of, and re-runs an orphaned in-progress one", async () => {
    const storeUrl = `sqlite://${join(await useTempDir(), "t.db")}`;
    const owner = await ownerOf(TEST_KEYS.default);
    const record = (prompt: string): TaskRecord => ({
      id: newTaskId(),
      owner,
      status: "queued",
      model: "gpt-image-1",
      request: { model: "gpt-image-1", prompt },
      responseFormat: "b64_json",
      created: Math.floor(Date.now() / 1000),
      attempts: 0,
    });
    const lostInQueue = record("never enqueued");
    const orphaned = record("left in progress");
    const backend = await openTaskBackend(
      testConfig("http://127.0.0.1:9/v1", { storeUrl }),
      pino({ level: "silent" }),
    );
    const { store } = backend;
    await store.create(lostInQueue);
    await store.create(orphaned);
    await store.transition(orphaned.id, "queued", { status: "in_progress", attempts: 1 });
    await backend.close();

    const app = await startTestApp({ storeUrl });
    onTestFinished(() => app.close());
    for (const id of [lostInQueue.id, orphaned.id]) {
      const done = await waitForStatus(app, id, ["completed", "failed"]);
      expect(done.body.status, done.text).toBe("completed");
    }
    expect(
      app.upstream.requests.map((request) => (request.body as { prompt: string }).prompt).sort(),
    ).toEqual(["left in progress", "never enqueued"]);
  });
});

/** The owner id the service gives a key: read from a task the key submits. */
async function ownerOf(key: string): Promise<string> {
  const storeUrl = `sqlite://${join(await useTempDir(), "probe.db")}`;
  const app = await startTestApp({ storeUrl });
  const submitted = await call(app, "POST", "/v1/images/tasks", {
    key,
    json: { model: "gpt-image-1", prompt: "probe" },
  });
  await app.close();
  const backend = await openTaskBackend(
    testConfig("http://127.0.0.1:9/v1", { storeUrl }),
    pino({ level: "silent" }),
  );
  const owner = (await backend.store.get(submitted.body.id))!.owner;
  await backend.close();
  return owner;
}
