import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import type { Config } from "../../../src/config/config-schema.js";
import type { ImageStore } from "../../../src/images/image-store.js";
import { createMemoryImageStore } from "../../../src/images/memory-image-store.js";
import {
  newTaskId,
  type TaskImage,
  type TaskInput,
  type TaskRecord,
} from "../../../src/tasks/core/task-record.js";
import { upgradeLegacyData } from "../../../src/tasks/legacy/upgrade-legacy-data.js";
import { openTaskBackend, type TaskBackend } from "../../../src/tasks/open-task-backend.js";
import { readAll } from "../../images/read-all.js";
import { writeLegacyBytes } from "../../support/legacy-writers.js";
import { deleteKeys, uniquePrefix } from "../../support/redis.js";
import { testConfig } from "../../support/start-test-app.js";
import { useTempDir } from "../task-api.js";

/*
 * The upgrade step on its own: what releases before the image store left in
 * a SQLite file or on Redis moves into the image store, records get their
 * keys, nothing is left behind, and two replicas upgrading at once agree.
 */

const logger = pino({ level: "silent" });

const PLACES: Array<{ name: string; config: () => Promise<Config> }> = [
  {
    name: "sqlite",
    config: async () =>
      testConfig("http://127.0.0.1:9/v1", {
        storeUrl: `sqlite://${join(await useTempDir(), "old.db")}`,
      }),
  },
  {
    name: "redis",
    config: async () => {
      const prefix = uniquePrefix("legacy-up");
      onTestFinished(() => deleteKeys(prefix).then(() => undefined));
      return testConfig("http://127.0.0.1:9/v1", { redis: { prefix } });
    },
  },
];

const bytesOf = (text: string) => Buffer.from(`\x89PNG-${text}`);

/** An unfinished edit and a finished generation, as the earlier release wrote them. */
async function writeOldTasks(config: Config, createdSec = Math.floor(Date.now() / 1000)) {
  const backend = await openTaskBackend(config, logger);
  const { store } = backend;
  const nowSec = Math.floor(Date.now() / 1000);
  const base = { owner: "key:old", model: "gpt-image-1", created: createdSec, attempts: 0 };
  const edit: TaskRecord = {
    ...base,
    id: newTaskId(),
    status: "queued",
    kind: "edit",
    request: { prompt: "edit" },
    responseFormat: "url",
    inputs: [
      { field: "image", mime: "image/png", bytes: 12 } as TaskInput,
      { field: "mask", mime: "image/png", bytes: 12 } as TaskInput,
    ],
  };
  const done: TaskRecord = {
    ...base,
    id: newTaskId(),
    status: "queued",
    request: { prompt: "done" },
    responseFormat: "b64_json",
  };
  try {
    await store.create(edit);
    await store.create(done);
    await store.transition(done.id, "queued", { status: "in_progress", attempts: 1 });
    const images = [
      { mime: "image/png", bytes: 12 },
      { mime: "image/png", bytes: 12 }, // its bytes had expired: it reads as gone
    ] as TaskImage[];
    await store.transition(
      done.id,
      "in_progress",
      { status: "completed", completed_at: nowSec, expires_at: nowSec + 3600, images },
      { ttlMs: 3_600_000 },
    );
  } finally {
    await backend.close();
  }
  await writeLegacyBytes(
    config,
    [
      ...["image", "mask"].map((text, index) => ({
        kind: "input" as const,
        id: edit.id,
        index,
        bytes: bytesOf(text),
      })),
      { kind: "image", id: done.id, index: 0, bytes: bytesOf("result") },
      // Bytes of a task that is gone: orphans, deleted.
      { kind: "image", id: newTaskId(), index: 0, bytes: bytesOf("orphan") },
    ],
    3_600_000,
  );
  return { edit: edit.id, done: done.id };
}

/** The upgrade step as start-up runs it on `backend`. */
function upgrade(
  backend: Pick<TaskBackend, "legacy" | "forwardSecret">,
  imageStore: ImageStore,
  config: Config,
) {
  return upgradeLegacyData({
    legacy: backend.legacy,
    forwardSecret: backend.forwardSecret,
    imageStore,
    config,
    logger,
  });
}

async function openBackend(config: Config): Promise<TaskBackend> {
  const backend = await openTaskBackend(config, logger);
  onTestFinished(() => backend.close());
  return backend;
}

describe.each(PLACES)("the upgrade step ($name)", ({ name, config: makeConfig }) => {
  it("moves every image into the image store, gives each record its keys, and leaves nothing behind", async () => {
    const config = await makeConfig();
    const ids = await writeOldTasks(config);
    const imageStore = createMemoryImageStore();
    // Two replicas at once on Redis; SQLite belongs to one process.
    const backends =
      name === "redis"
        ? await Promise.all([openBackend(config), openBackend(config)])
        : [await openBackend(config)];
    await Promise.all(backends.map((backend) => upgrade(backend, imageStore, config)));
    const [first] = backends as [TaskBackend];
    const { store, legacy } = first;

    const edit = (await store.get(ids.edit))!;
    expect(edit.status).toBe("queued");
    const inputs = await Promise.all(
      edit.inputs!.map(async (input) => readAll((await imageStore.get(input.key))!.body)),
    );
    expect(inputs).toEqual([bytesOf("image"), bytesOf("mask")]);

    const done = (await store.get(ids.done))!;
    expect(done.images!.map((image) => image.key)).toHaveLength(2);
    const result = await imageStore.get(done.images![0]!.key);
    expect(await readAll(result!.body)).toEqual(bytesOf("result"));
    expect(await imageStore.get(done.images![1]!.key)).toBeUndefined();
    // Keys start with the day the task expires, as new ones do.
    expect(done.images![0]!.key).toMatch(/^\d{4}-\d{2}-\d{2}\/task_/);

    expect(await legacy!.tasksWithBytes(10)).toEqual([]);
    // Run again (the next start): nothing to do, nothing changes.
    await upgrade(first, imageStore, config);
    expect(await store.get(ids.done)).toEqual(done);
  });

  it("keeps the inputs of an edit queued long before the upgrade until it can run", async () => {
    const config = await makeConfig();
    const weekAgo = Math.floor(Date.now() / 1000) - 7 * 24 * 3600;
    const ids = await writeOldTasks(config, weekAgo);
    const imageStore = createMemoryImageStore();
    const backend = await openBackend(config);
    const { store } = backend;
    await upgrade(backend, imageStore, config);
    // Image keys start with the day they expire: the sweep deletes a key whose day has passed.
    const today = new Date().toISOString().slice(0, 10);
    const days = (await store.get(ids.edit))!.inputs!.map((input) => input.key.slice(0, 10));
    expect(days).toHaveLength(2);
    for (const day of days) expect(day >= today, `${day} is before ${today}`).toBe(true);
  });
});
