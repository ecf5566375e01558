import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, streamText } from "ai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

// Clients nobody here wrote, with their default settings, against the service.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const last = (route: "chat" | "responses") =>
  app.upstream.requests
    .filter((r) => r.path === (route === "chat" ? "/v1/chat/completions" : "/v1/responses"))
    .at(-1);

describe("Vercel AI SDK (the default model factory: the Responses API)", () => {
  const model = () => createOpenAI({ baseURL: app.baseURL, apiKey: app.key })("gpt-4o-mini");

  it("generateText", async () => {
    const { text, usage } = await generateText({ model: model(), prompt: "Say hi" });
    expect(text).toBe("Hello from fake-upstream!");
    expect(usage.outputTokens).toBe(4);
    expect(last("responses")?.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
  });

  it("streamText", async () => {
    const result = streamText({ model: model(), prompt: "Say hi" });
    let text = "";
    for await (const delta of result.textStream) text += delta;
    expect(text).toBe("Hello from fake-upstream!");
    expect((await result.usage).inputTokens).toBe(7);
  });
});

describe("LangChain ChatOpenAI", () => {
  const chat = (fields: Record<string, unknown> = {}) =>
    new ChatOpenAI({
      model: "gpt-4o-mini",
      apiKey: app.key,
      configuration: { baseURL: app.baseURL },
      maxRetries: 0,
      ...fields,
    });

  it("invoke", async () => {
    const reply = await chat().invoke("Say hi");
    expect(reply.content).toBe("Hello from fake-upstream!");
    expect(last("chat")?.body).toMatchObject({ model: "gpt-4o-mini" });
  });

  it("stream", async () => {
    let text = "";
    for await (const chunk of await chat().stream("Say hi")) text += String(chunk.content);
    expect(text).toBe("Hello from fake-upstream!");
    expect(last("chat")?.body).toMatchObject({ stream: true });
  });

  it("invoke with useResponsesApi", async () => {
    const reply = await chat({ useResponsesApi: true }).invoke("Say hi");
    expect(reply.text).toBe("Hello from fake-upstream!");
    expect(last("responses")?.body).toMatchObject({ model: "gpt-4o-mini" });
  });
});
