import { join } from "node:path";
import OpenAI from "openai";
import { describe, expect, it, onTestFinished } from "vitest";
import { sdkError } from "../http/error-envelope.js";
import { startTestApp, TEST_KEYS } from "../support/start-test-app.js";
import { useTempDir } from "../tasks/task-api.js";

// On the embedded default the owners of the responses answered in one turn of the event loop are
// committed together: every id a client holds must reach its channel at once, for its key alone.
describe("responses' owners on the SQLite store", () => {
  it("routes each of many responses created at once, as soon as its creator has it", async () => {
    const storeUrl = `sqlite://${join(await useTempDir(), "tasks.db")}`;
    const app = await startTestApp({ storeUrl });
    let closed = false;
    onTestFinished(() => (closed ? undefined : app.close()));
    const client = new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
    const other = new OpenAI({ apiKey: TEST_KEYS.other, baseURL: app.baseURL, maxRetries: 0 });

    const created = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        client.responses.create({ model: "gpt-4o-mini", input: `question ${i}` }),
      ),
    );
    expect(new Set(created.map((response) => response.id)).size).toBe(24);
    const fetched = await Promise.all(created.map(({ id }) => client.responses.retrieve(id)));
    expect(fetched.map((response) => response.id)).toEqual(created.map(({ id }) => id));
    const refused = await sdkError(other.responses.retrieve(created[0]!.id));
    expect(refused.status).toBe(404);
    expect(refused.code).toBe("response_not_found");

    // A streamed response's owner is recorded as its first event goes out, not awaited: a client
    // that asks at once, while the stream still runs, is routed all the same.
    const stream = await client.responses.create({
      model: "gpt-4o-mini",
      input: "hi",
      stream: true,
    });
    let asked: Promise<OpenAI.Responses.Response> | undefined;
    for await (const event of stream) {
      if (event.type === "response.created") asked = client.responses.retrieve(event.response.id);
    }
    expect((await asked!).status).toBe("completed");

    // And they are in the file: a restart on it routes them still.
    await app.close();
    closed = true;
    const again = await startTestApp({ storeUrl });
    onTestFinished(() => again.close());
    const reopened = new OpenAI({ apiKey: again.key, baseURL: again.baseURL, maxRetries: 0 });
    const last = created[23]!.id;
    const afterRestart = await sdkError(reopened.responses.retrieve(last));
    // The new app's fake channel never saw the response: its 404 comes from the channel, not
    // the service's own `response_not_found` for an id it cannot route.
    expect(afterRestart.status).toBe(404);
    expect(afterRestart.code).not.toBe("response_not_found");
    expect(again.upstream.requests.some((r) => r.path === `/v1/responses/${last}`)).toBe(true);
  });
});
