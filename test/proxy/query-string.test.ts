import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

// Azure-style channels need their `api-version`: a passthrough request's query string
// reaches the channel on every route, as the SDK sends it (`defaultQuery`).
const QUERY = "?api-version=2025-01-01";
let app: TestApp;
let client: OpenAI;

beforeAll(async () => {
  app = await startTestApp();
  client = new OpenAI({
    apiKey: app.key,
    baseURL: app.baseURL,
    maxRetries: 0,
    defaultQuery: { "api-version": "2025-01-01" },
  });
});
beforeEach(() => app.upstream.reset());
afterAll(() => app.close());

/** The paths the channel was asked for, query included. */
const paths = () => app.upstream.requests.map((request) => request.path);

describe("the query string of a passthrough request", () => {
  it("arrives on a JSON route and on a stream", async () => {
    await client.chat.completions.create({ model: "gpt-4o-mini", messages: [] });
    const stream = await client.responses.create({
      model: "gpt-4o-mini",
      input: "hi",
      stream: true,
    });
    for await (const _event of stream) {
      // drained
    }
    expect(paths()).toEqual([`/v1/chat/completions${QUERY}`, `/v1/responses${QUERY}`]);
  });

  it("arrives on a multipart route", async () => {
    await client.audio.transcriptions.create({
      model: "gpt-4o-mini",
      file: await toFile(Buffer.alloc(1024, 1), "a.wav", { type: "audio/wav" }),
    });
    expect(paths()).toEqual([`/v1/audio/transcriptions${QUERY}`]);
  });

  it("arrives on the routes of a stored response", async () => {
    const created = await client.responses.create({ model: "gpt-4o-mini", input: "hi" });
    await client.responses.retrieve(created.id);
    await client.responses.inputItems.list(created.id, { limit: 5 });
    expect(paths()).toEqual([
      `/v1/responses${QUERY}`,
      `/v1/responses/${created.id}${QUERY}`,
      `/v1/responses/${created.id}/input_items?api-version=2025-01-01&limit=5`,
    ]);
  });
});
