import { join } from "node:path";
import Keyv from "keyv";
import { describe, expect, it } from "vitest";
import { createKeyvCodec } from "../../../src/tasks/store/keyv-codec.js";
import { getTask, submitOk, useApp, useTempDir, waitForStatus } from "../task-api.js";

// The Redis store and the SQLite store's key-value table write Keyv's own format at native
// JSON's cost: what older versions (and replicas) wrote reads the same, and they read what it
// writes. (A SQLite file of the Keyv-table release: sqlite-migration.test.ts.)

const samples: unknown[] = [
  { value: { id: "task_x", prompt: "plain", n: 1, nested: [1, "two", { three: null }] } },
  { value: { prompt: ":starts with a colon", list: [":a", "::b", "c:"] }, expires: 123 },
  { value: ":base64:not really", expires: 1 },
  { value: Buffer.from("bytes") },
  { value: { bytes: Buffer.from([0, 1, 2]) } },
  { value: { ":key": "a key with a colon", quote: 'say ":" "' } },
  { value: { text: 'escaped \\":x and ,":y and {":z' } },
  { value: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ", expires: 9e12 },
  { value: ["é", "😀", "\u2028", 1.5, -0, true, false, null] },
  { value: { undefinedField: undefined, kept: 1 } },
  { value: undefined },
];

describe("the task stores' Keyv codec", () => {
  it("writes what Keyv's default serializer writes, and reads alike", () => {
    const keyv = new Keyv();
    const codec = createKeyvCodec(keyv);
    for (const sample of samples) {
      const theirs = keyv.serialize!(sample as never) as string;
      expect(codec.serialize(sample as never), theirs).toBe(theirs);
      expect(codec.deserialize(theirs), theirs).toEqual(keyv.deserialize!(theirs));
    }
  });

  it("keeps a SQLite store's records as they were across a restart", async () => {
    const dir = await useTempDir();
    const storeUrl = `sqlite://${join(dir, "tasks.db")}`;
    const first = await useApp({ storeUrl });
    const id = await submitOk(first, { prompt: ":a prompt that starts with a colon" });
    const done = await waitForStatus(first, id, ["completed"]);
    await first.close();

    const second = await useApp({ storeUrl });
    const again = await getTask(second, id);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(done.body);
  });
});
