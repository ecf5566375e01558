import { join } from "node:path";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { startFakeUpstream } from "../../support/fake-upstream.js";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { useApp, useTempDir } from "../task-api.js";

// The owners of stored responses live in the SQLite store's key-value table: kept as long as
// tasks, across a restart, as on Redis.

describe("stored responses' owners on the SQLite store", () => {
  it("still route a response to its channel and only for its key after a restart", async () => {
    const storeUrl = `sqlite://${join(await useTempDir(), "owners.db")}`;
    const upstream = await startFakeUpstream();
    const first = await useApp({ storeUrl, upstream });
    const client = (key: string, app = first) =>
      new OpenAI({ apiKey: key, baseURL: app.baseURL, maxRetries: 0 });
    const created = await client(TEST_KEYS.default).responses.create({
      model: "gpt-4o-mini",
      input: "kept across a restart",
    });
    await first.close();

    const second = await useApp({ storeUrl, upstream });
    const fetched = await client(TEST_KEYS.default, second).responses.retrieve(created.id);
    expect(fetched.id).toBe(created.id);
    expect(upstream.requests.at(-1)?.path).toBe(`/v1/responses/${created.id}`);
    const calls = upstream.requests.length;
    await expect(
      client(TEST_KEYS.other, second).responses.retrieve(created.id),
    ).rejects.toMatchObject({ status: 404 });
    expect(upstream.requests).toHaveLength(calls);
    await upstream.close();
  });
});
